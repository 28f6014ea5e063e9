"""A further version of a detector beside its default one: listed and picked as NAME@VERSION, scored side by side
with the default in one pipeline, left out of ``all`` and of Triton, calibrated in its own folder."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from detectors.errors import CardError, UnknownDetector
from detectors.repository import VERSIONS_DIR, get_detectors, install, list_detectors, list_versions, set_threshold
from detectors.runtimes import check_servable
from gateway.cli.app import main as cli

NEW = "9.9.9-test"


@pytest.fixture
def repo(tmp_path):
    """A user repository holding spectral's shipped default and, beside it, the same graph as version NEW."""
    shipped = list_detectors()["spectral"]
    repo = tmp_path / "models"
    shutil.copytree(shipped.folder, repo / "spectral", ignore=shutil.ignore_patterns(VERSIONS_DIR))
    install(shipped.model_path, shipped.card.model_copy(update={"version": NEW}), repo, beside=True)
    return repo


def test_both_versions_are_listed_and_picked_by_name_and_version(repo):
    have = list_versions(repo)
    default = have["spectral"]
    # the default versions alone by name, as before any version was added
    assert f"spectral@{NEW}" not in list_detectors(repo) and list_detectors(repo)["spectral"] == default
    assert have[f"spectral@{NEW}"].card.version == NEW and not have[f"spectral@{NEW}"].default
    assert have[f"spectral@{NEW}"].folder == repo / "spectral" / VERSIONS_DIR / NEW
    # `all` is every detector's default version: what a run scored before a version was added
    assert f"spectral@{NEW}" not in {i.key for i in get_detectors("all", repo)}
    picked = get_detectors(f"spectral@{default.card.version},spectral@{NEW}", repo)
    assert [(i.card.version, i.default) for i in picked] == [(default.card.version, True), (NEW, False)]
    with pytest.raises(UnknownDetector, match=r"spectral@0\.0\.1"):
        get_detectors("spectral@0.0.1", repo)
    with pytest.raises(CardError, match="named twice"):
        get_detectors(f"spectral,spectral@{default.card.version}", repo)


def test_detectors_list_shows_both_versions(repo):
    done = CliRunner().invoke(cli, ["detectors", "list", "--repo", str(repo)])
    assert done.exit_code == 0, done.output
    lines = [line.split()[:3] for line in done.output.splitlines() if line.startswith("spectral")]
    default = list_detectors(repo)["spectral"].card.version
    # each version on its line, the default one first; the shipped augmented version beside the user's two
    assert lines == [
        ["spectral", "user", default],
        ["spectral@1.1.0-proxy1000-aug", "shipped", "1.1.0-proxy1000-aug"],
        [f"spectral@{NEW}", "user", NEW],
    ]


def test_a_version_goes_beside_an_installed_other_one(tmp_path):
    shipped = list_detectors()["spectral"]
    with pytest.raises(CardError, match="beside another installed one"):
        install(shipped.model_path, shipped.card.model_copy(update={"version": NEW}), tmp_path / "empty", beside=True)


def test_one_pipeline_scores_both_versions_of_one_detector(repo):
    from gateway.core.config import PipelineSettings
    from gateway.core.messages import VideoItem
    from gateway.scoring.assembly import build_pipeline
    from tests.support.media import ramp_clip

    default = list_detectors(repo)["spectral"].card.version
    settings = PipelineSettings(
        detectors=f"spectral,spectral@{NEW}", conditions="original,spatial", profile="throughput", repo=repo
    )
    rows = build_pipeline(settings).score(VideoItem(video_id="v", data=ramp_clip(frames=24))).rows
    assert [(r.condition, r.detector, r.detector_version) for r in rows] == [
        ("original", "spectral", default),
        ("original", "spectral", NEW),
        ("spatial", "spectral", default),
        ("spatial", "spectral", NEW),
    ]
    # the same graph under two versions: the same scores, two keys
    assert rows[0].score == rows[1].score and rows[0].key != rows[1].key
    assert all(r.error is None for r in rows)


def test_triton_is_not_asked_for_a_version_beside_the_default(repo):
    have = list_versions(repo)
    check_servable(have["spectral"], "triton")
    with pytest.raises(CardError, match="Triton serves each detector's default version only"):
        check_servable(have[f"spectral@{NEW}"], "triton")


def test_a_version_is_calibrated_in_its_own_folder(repo):
    from detectors.card import Threshold

    have = list_versions(repo)
    moved = set_threshold(have[f"spectral@{NEW}"], Threshold(value=1.5, calibration="test"), repo)
    assert moved.folder == repo / "spectral" / VERSIONS_DIR / NEW
    after = list_versions(repo)
    assert after[f"spectral@{NEW}"].card.threshold.value == 1.5
    assert after["spectral"].card.threshold == have["spectral"].card.threshold


def test_the_augmented_reference_versions_ship_beside_their_defaults_and_the_demo_pairs_them():
    from gateway.ops.demo import version_pairs

    shipped = list_versions()
    for name in ("npr", "spectral"):
        beside = [i for i in shipped.values() if i.card.name == name and not i.default]
        assert [i.card.version for i in beside] == ["1.1.0-proxy1000-aug"]
        assert "augmentation" in beside[0].card.training_data and "PROXY CORPUS" in beside[0].card.training_data
    assert version_pairs() == [
        ("npr@1.0.0-proxy1000", "npr@1.1.0-proxy1000-aug"),
        ("spectral@1.0.0-proxy1000", "spectral@1.1.0-proxy1000-aug"),
    ]


def test_detectors_calibrate_writes_the_version_the_run_scored_and_leaves_the_default_alone(repo, tmp_path):
    """A run of the further version: its card gets the threshold, the default version's card keeps its own."""
    from gateway.batch.results import merge, write_part
    from gateway.core.messages import ScoreRow

    have = list_versions(repo)
    new, default = have[f"spectral@{NEW}"], have["spectral"]
    rows = [
        ScoreRow(video_id=f"v{i}", condition="original", detector="spectral", detector_version=NEW,
                 runtime="embedded", label="real" if i % 2 else "generated", source="real" if i % 2 else "gen",
                 anchor_id="v1", score=float(i), decision=False, threshold=99.0, model_sha256=new.model_sha256)
        for i in range(40)
    ]  # fmt: skip
    (tmp_path / "run" / "parts").mkdir(parents=True)
    write_part(tmp_path / "run" / "parts", 0, 0, [row.model_dump() for row in rows])
    merge(tmp_path / "run")
    done = CliRunner().invoke(
        cli, ["detectors", "calibrate", str(tmp_path / "run"), "--real-recall", "0.9", "--repo", str(repo), "--force"]
    )
    assert done.exit_code == 0, done.output
    after = list_versions(repo)
    assert after[f"spectral@{NEW}"].card.threshold.recalibrated is not None
    assert after["spectral"].card.threshold == default.card.threshold
    assert f"written to {repo / 'spectral' / VERSIONS_DIR / NEW / 'card.yaml'}" in done.output
