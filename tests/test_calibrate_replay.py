"""A threshold from ``lastmile detectors calibrate`` holds where it was fitted: a replay of the same real videos,
deciding with the recalibrated card from the user repository, keeps the RealR the card's record states, inside
its interval and at or over the target (process layer: the replays start worker processes)."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from detectors.proxy.corpus import CorpusConfig, synthesize
from gateway.batch.results import read_results
from gateway.cli.app import main as cli

TARGET = 0.75


def test_a_recalibrated_threshold_gives_its_stated_realr_when_the_same_reals_are_replayed(tmp_path):
    manifest = synthesize(CorpusConfig(anchors=8, seed=31, width=160, height=128, max_seconds=2.0, generators=()),
                          tmp_path / "reals")  # fmt: skip
    assert {json.loads(line)["label"] for line in manifest.read_text().splitlines()} == {"real"}
    repo = tmp_path / "models"
    args = ["--detectors", "d3_px", "--conditions", "original", "--profile", "throughput", "--workers", "2"]
    first = CliRunner().invoke(cli, ["replay", str(manifest), *args, "--repo", str(repo), "--out", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    before = [r for r in read_results(tmp_path / "a" / "results.parquet") if r.score is not None]
    assert len(before) == 8

    done = CliRunner().invoke(
        cli,
        ["detectors", "calibrate", str(tmp_path / "a"), "--real-recall", str(TARGET), "--repo", str(repo), "--force"],
    )  # fmt: skip  (8 reals: --force)
    assert done.exit_code == 0, done.output
    card = yaml.safe_load((repo / "d3_px" / "card.yaml").read_text())["threshold"]
    record = card["recalibrated"]
    lo, hi = record["interval"]

    second = CliRunner().invoke(cli, ["replay", str(manifest), *args, "--repo", str(repo), "--out",
                                      str(tmp_path / "b")])  # fmt: skip
    assert second.exit_code == 0, second.output
    after = [r for r in read_results(tmp_path / "b" / "results.parquet") if r.score is not None]
    assert {r.threshold for r in after} == {card["value"]}  # the replay decided with the recalibrated card
    real_recall = sum(not r.decision for r in after) / len(after)
    assert real_recall == record["real_recall"] and real_recall >= TARGET and lo <= real_recall <= hi
    assert sorted(r.score for r in after) == sorted(r.score for r in before)  # the same videos, the same scores
