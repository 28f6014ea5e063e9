"""``lastmile detectors calibrate`` (unit: in-process; the replay that proves it end to end is in
``tests/test_calibrate_replay.py``): the threshold a run's real videos on original give, with what it rests on,
written into the detector's card in the user repository, never into the package."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from detectors.repository import SHIPPED_REPO, list_detectors
from detectors.stats import intervals, metrics
from gateway.batch.results import merge, write_part
from gateway.cli.app import main as cli
from gateway.core.messages import ScoreRow
from gateway.evaluation.calibration import calibrate_run
from gateway.evaluation.errors import EvaluationError


def _rows(det: str = "npr", version: str = "1", sha: str | None = "a" * 64, n: int = 40, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = "real" if i % 2 == 0 else "generated"
        for cond in ("original", "full"):
            score = float(rng.normal(0.0 if label == "real" else 2.0) + (1.0 if cond == "full" else 0.0))
            rows.append(ScoreRow(video_id=f"v{i}", condition=cond, detector=det, detector_version=version,
                                 runtime="embedded", label=label, source=label if label == "real" else "gen",
                                 anchor_id="v0", score=score, decision=score >= 5.0, threshold=5.0,
                                 model_sha256=sha))  # fmt: skip
    return rows


def test_the_threshold_is_the_smallest_giving_the_target_realr_on_the_runs_reals_under_original():
    rows = _rows() + _rows("d3", seed=1)
    d3, npr = calibrate_run(rows, 0.9)  # (in name order)
    reals = np.array([r.score for r in rows if r.detector == "npr" and r.condition == "original" and r.label == "real"])
    assert npr.threshold == metrics.calibrate_threshold(reals, 0.9) and npr.reals == 20 == reals.size
    kept = int(np.sum(reals < npr.threshold))
    assert npr.real_recall == kept / 20 >= 0.9 and (kept - 1) / 20 < 0.9  # reached, by the fewest videos kept
    assert npr.interval == pytest.approx(intervals.wilson_interval(kept, 20)[1:])
    assert npr.previous == 5.0 and (npr.version, npr.model_sha256) == ("1", "a" * 64)
    assert d3.detector == "d3" and d3.threshold != npr.threshold  # each detector on its own scores


@pytest.mark.parametrize(
    ("rows", "names", "target", "message"),
    [
        (_rows(), ["gone"], 0.9, r"gone: the run holds no row of this detector \(it holds \['npr'\]\)"),
        (_rows() + _rows(version="2", seed=3), None, 0.9, "npr: the run scored several versions or models of it"),
        ([r for r in _rows() if r.label == "generated"], None, 0.9, "npr: no real video was scored on original"),
        (_rows(), None, 1.0, r"must lie in \(0, 1\)"),
    ],
)
def test_a_run_that_cannot_calibrate_a_detector_says_why(rows, names, target, message):
    with pytest.raises(EvaluationError, match=message):
        calibrate_run(rows, target, names)


def _run(tmp_path, rows):
    (tmp_path / "run" / "parts").mkdir(parents=True)
    write_part(tmp_path / "run" / "parts", 0, 0, [row.model_dump() for row in rows])
    merge(tmp_path / "run")
    return tmp_path / "run"


@pytest.fixture(autouse=True)
def _no_user_repository_of_the_developers(tmp_path, monkeypatch):
    """The tests' own user repository (empty): the developer's ~/.local/share/lastmile/models is never read."""
    monkeypatch.setenv("LASTMILE_REPO", str(tmp_path / "no-user-repo"))


def test_calibrating_a_shipped_detector_writes_a_copy_into_the_user_repository_never_the_package(tmp_path):
    shipped = list_detectors()["d3_px"]
    assert shipped.origin == "shipped"
    package_card = (SHIPPED_REPO / "d3_px" / "card.yaml").read_bytes()
    run = _run(tmp_path, _rows("d3_px", shipped.card.version, shipped.model_sha256))
    repo = tmp_path / "models"
    args = ["--repo", str(repo), "--force"]  # (20 reals: too few to be written without --force)
    result = CliRunner().invoke(cli, ["detectors", "calibrate", str(run), "--real-recall", "0.9", *args])
    assert result.exit_code == 0, result.output
    card = yaml.safe_load((repo / "d3_px" / "card.yaml").read_text())
    (expected,) = calibrate_run(_rows("d3_px", shipped.card.version, shipped.model_sha256), 0.9)
    threshold = card["threshold"]
    assert threshold["value"] == expected.threshold and threshold["target_real_recall"] == 0.9
    record = threshold["recalibrated"]
    assert record["reals"] == 20 and record["run"] == str(run) and len(record["results_sha256"]) == 64
    assert record["previous"] == shipped.card.threshold.value and record["real_recall"] == expected.real_recall
    assert "Wilson 95%" in threshold["calibration"] and f"run {run}" in threshold["calibration"]
    now = list_detectors(repo)["d3_px"]
    assert now.origin == "user" and now.card.threshold.value == expected.threshold  # the user's copy wins
    assert now.model_sha256 == shipped.model_sha256  # the same graph, copied
    assert (SHIPPED_REPO / "d3_px" / "card.yaml").read_bytes() == package_card  # the package untouched
    assert f"written to {repo / 'd3_px' / 'card.yaml'}" in result.output

    again = CliRunner().invoke(cli, ["detectors", "calibrate", str(run), "--real-recall", "0.5", *args])
    assert again.exit_code == 0, again.output  # now the user's own: its card rewritten in place
    assert list_detectors(repo)["d3_px"].card.threshold.recalibrated.previous == expected.threshold


def test_a_run_of_another_version_than_the_installed_one_is_refused(tmp_path):
    run = _run(tmp_path, _rows("d3_px", "0.0.1-other", "b" * 64))
    result = CliRunner().invoke(cli, ["detectors", "calibrate", str(run), "--real-recall", "0.9",
                                      "--repo", str(tmp_path / "models")])  # fmt: skip
    assert result.exit_code == 1 and "the run scored version 0.0.1-other" in result.output
    assert "calibrate on a run of the installed one" in result.output and not (tmp_path / "models").exists()


def test_too_few_reals_to_estimate_the_target_are_refused_without_force_and_nothing_is_written(tmp_path):
    """Two real videos moved spectral's threshold by 9 points without a word. A threshold is now written only where
    the Wilson 95% interval of the RealR it reaches is at most 20 points wide, or with --force."""
    shipped = list_detectors()["d3_px"]
    rows = _rows("d3_px", shipped.card.version, shipped.model_sha256, n=4)  # 2 reals
    run, repo = _run(tmp_path, rows), tmp_path / "models"
    refused = CliRunner().invoke(
        cli, ["detectors", "calibrate", str(run), "--real-recall", "0.95", "--repo", str(repo)]
    )
    (c,) = calibrate_run(rows, 0.95)
    assert refused.exit_code == 1 and not repo.exists()
    assert f"d3_px: 2 real videos give RealR {c.real_recall:.3f} with a Wilson 95% interval" in refused.output
    assert "at most 20 points wide (about 24 real videos at this target)" in refused.output
    assert "--force" in refused.output
    forced = CliRunner().invoke(cli, ["detectors", "calibrate", str(run), "--real-recall", "0.95", "--repo", str(repo),
                                      "--force"])  # fmt: skip
    assert forced.exit_code == 0 and "on 2 real videos (target 0.95)" in forced.output
    enough = _rows("d3_px", shipped.card.version, shipped.model_sha256, n=200)  # 100 reals at 0.9: 11.6 points wide
    (wide,) = calibrate_run(enough, 0.9)
    assert wide.too_few is None and wide.interval[1] - wide.interval[0] < 0.2


def test_after_a_calibration_every_score_row_carries_the_new_thresholds_id(tmp_path):
    """The threshold is part of the detector's identity: rows scored after `detectors calibrate` carry the
    calibration's id (before it: the card's), and so do their idempotency keys (gateway/core/messages.py)."""
    from gateway.core.config import PipelineSettings
    from gateway.core.messages import VideoItem
    from gateway.scoring.assembly import build_pipeline
    from tests.support.media import ramp_clip

    shipped = list_detectors()["d3_px"]
    run, repo = _run(tmp_path, _rows("d3_px", shipped.card.version, shipped.model_sha256)), tmp_path / "models"
    settings = PipelineSettings(detectors="d3_px", conditions="original", profile="throughput", repo=repo)
    item = VideoItem(video_id="v", data=ramp_clip(frames=24))
    (before,) = build_pipeline(settings).score(item).rows
    assert before.threshold_id == "card" and before.key == f"v|original|d3_px|{shipped.card.version}"
    done = CliRunner().invoke(cli, ["detectors", "calibrate", str(run), "--real-recall", "0.9", "--repo", str(repo),
                                    "--force"])  # fmt: skip
    assert done.exit_code == 0, done.output
    card = list_detectors(repo)["d3_px"].card
    (after,) = build_pipeline(settings).score(item).rows
    assert after.threshold_id == card.threshold.id and card.threshold.id.startswith("cal-")
    assert after.threshold == card.threshold.value and after.score == before.score
    assert after.key == f"v|original|d3_px|{shipped.card.version}+{card.threshold.id}"
    # an error row of the same video carries it too (one key per video, condition and detector), and a replay via
    # Kafka waits for the keys the gateway publishes
    from gateway.batch.kafka_replay import expected_keys
    from gateway.batch.replay import ReplayConfig

    (failed,) = build_pipeline(settings, runtimes=False).error_rows(item, ValueError("x"))
    assert failed.key == after.key
    manifest = Path(__file__).resolve().parent.parent / "examples" / "manifest.jsonl"
    cfg = ReplayConfig(manifest=manifest, detectors="d3_px", conditions="original", repo=repo)
    assert expected_keys(cfg, ["v"]) == {after.key}
