from __future__ import annotations

import pytest

from transforms.catalog import load_conditions_file, select_conditions
from transforms.errors import SpecError
from transforms.spec import (
    LASTMILE,
    PROFILES,
    Condition,
    FpsStep,
    H264Step,
    ScaleStep,
    Vp9Step,
    spec_hash,
)


def test_lastmile_defaults_follow_the_protocol():
    by_name = {c.name: c for c in LASTMILE}
    assert list(by_name) == ["original", "transcode", "spatial", "temporal", "presentation", "full"]
    assert [s.kind for s in by_name["full"].steps] == ["vp9", "scale", "fps", "badge", "h264"]
    vp9, h264 = by_name["transcode"].steps
    assert (vp9.crf, vp9.bitrate, h264.crf, h264.profile) == (32, 0, 23, "high")
    assert by_name["spatial"].steps[1].factor == 0.5 and by_name["temporal"].steps[1].fps == 8
    assert PROFILES["fidelity"].x264_preset == "medium"
    assert (PROFILES["fidelity"].vp9_deadline, PROFILES["fidelity"].vp9_cpu_used) == ("good", 3)
    assert PROFILES["throughput"].vp9_deadline == "realtime" and PROFILES["throughput"].vp9_cpu_used == 8


def test_spec_hash_is_stable_and_sensitive():
    full = LASTMILE[-1]
    fid, thr = PROFILES["fidelity"], PROFILES["throughput"]
    assert spec_hash(full, fid) == spec_hash(Condition.model_validate(full.model_dump()), fid)
    assert spec_hash(full, fid) != spec_hash(full, thr)
    assert spec_hash(full, fid) != spec_hash(full, fid.with_determinism(True))
    changed = full.model_copy(update={"steps": (Vp9Step(crf=33), *full.steps[1:])})
    assert spec_hash(changed, fid) != spec_hash(full, fid)
    reworded = full.model_copy(update={"description": "other words"})
    assert spec_hash(reworded, fid) == spec_hash(full, fid)
    # the source as it is does not depend on the encoder profile
    assert spec_hash(LASTMILE[0], fid) == spec_hash(LASTMILE[0], thr)


def test_scale_rounds_to_even_and_caps_without_upscaling():
    assert ScaleStep().output_size(1280, 720) == (640, 360)
    assert ScaleStep().output_size(175, 143) == (88, 72)
    assert ScaleStep(factor=1.0, max_short_side=480).output_size(1920, 1080) == (854, 480)
    assert ScaleStep(factor=1.0, max_short_side=480).output_size(320, 240) == (320, 240)


@pytest.mark.parametrize(
    "steps, message", [((Vp9Step(),), "must end with an 'h264'"), ((H264Step(), FpsStep()), "must end")]
)
def test_malformed_conditions_are_rejected(steps, message):
    with pytest.raises(ValueError, match=message):
        Condition(name="bad", steps=steps)
    # an H.264 inside a chain is a repost (encode, decode, go on); only the last step is the output
    assert Condition(name="repost", steps=(H264Step(), FpsStep(), H264Step())).steps[0].kind == "h264"


def test_conditions_file_yaml_and_selection(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "profile: {name: mine, vp9_deadline: realtime, vp9_cpu_used: 8, x264_preset: veryfast}\n"
        "conditions:\n"
        "  - name: tiny\n"
        "    steps: [{kind: vp9, crf: 40}, {kind: scale, factor: 0.25}, {kind: h264}]\n"
    )
    parsed = load_conditions_file(path)
    assert parsed.profile.name == "mine" and parsed.conditions[0].steps[1].factor == 0.25
    assert [c.name for c in select_conditions("original,tiny", parsed.conditions)] == ["original", "tiny"]
    with pytest.raises(SpecError, match="unknown condition"):
        select_conditions("nope")
    with pytest.raises(SpecError, match="duplicate"):
        select_conditions("full,full")
    bad = tmp_path / "bad.yaml"
    bad.write_text("conditions: [{name: x, steps: [{kind: warp}]}]\n")
    with pytest.raises(SpecError, match="invalid conditions file"):
        load_conditions_file(bad)
