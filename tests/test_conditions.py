"""One condition resolver: every command and the gateway's settings resolve `all` and a named list, with and
without a conditions file, to the same ordered list. `all` is the six LastMile conditions, then the file's new
ones; a file condition with a LastMile name replaces it in place; a named list keeps its order."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from gateway.batch.kafka_replay import expected_keys, gateway_config
from gateway.batch.replay import ReplayConfig
from gateway.core.config import GatewayConfig
from gateway.scoring.assembly import build_pipeline
from tests.support.media import make_clip
from transforms.spec import LASTMILE

SIX = [c.name for c in LASTMILE]
FILE = {
    "conditions": [
        {"name": "quarter", "steps": [{"kind": "vp9"}, {"kind": "scale", "factor": 0.25}, {"kind": "h264"}]},
        {"name": "spatial", "steps": [{"kind": "vp9"}, {"kind": "scale", "factor": 0.75}, {"kind": "h264"}]},
    ]
}
CASES = {
    ("all", False): SIX,
    ("all", True): [*SIX, "quarter"],
    ("full,original", False): ["full", "original"],
    ("quarter,original,spatial", True): ["quarter", "original", "spatial"],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conditions")
    spec = tmp / "conds.yaml"
    spec.write_text(yaml.safe_dump(FILE))
    clip = tmp / "clip.mp4"
    clip.write_bytes(make_clip(tmp, "src.mp4", size="64x48", seconds="0.5"))
    manifest = tmp / "manifest.jsonl"
    manifest.write_text('{"video_id": "r", "uri": "clip.mp4", "label": "real", "source": "real", "anchor_id": "r"}\n')
    return {"spec": spec, "clip": clip, "manifest": manifest, "tmp": tmp}


def _spatial_factor(conditions) -> float | None:
    spatial = next((c for c in conditions if c.name == "spatial"), None)
    return None if spatial is None else next(s.factor for s in spatial.steps if s.kind == "scale")


@pytest.mark.parametrize(("names", "with_file"), list(CASES))
def test_every_entry_point_resolves_the_same_ordered_list(files, names, with_file):
    want = CASES[(names, with_file)]
    spec = files["spec"] if with_file else None
    factor = 0.75 if with_file else 0.5  # the file's `spatial` replaces LastMile's in place

    # lastmile transform: the variants it writes, in the order it reports them
    out = files["tmp"] / f"out-{len(names)}-{with_file}"
    cmd = [sys.executable, "-m", "gateway.cli", "transform", str(files["clip"]), "--conditions", names]
    cmd += ["--profile", "throughput", "--out", str(out)] + (["--conditions-file", str(spec)] if spec else [])
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert re.findall(r"clip\.([\w-]+)\.mp4", res.stdout) == want

    # lastmile replay: the pipeline its workers build
    replay_cfg = ReplayConfig(manifest=files["manifest"], conditions=names, conditions_file=spec, detectors="d3_px")
    replay_conditions = build_pipeline(replay_cfg).conditions
    assert [c.name for c in replay_conditions] == want
    assert _spatial_factor(replay_conditions) in (None, factor)

    # lastmile replay --via kafka: the gateway it configures, and the score events it waits for
    via = gateway_config(replay_cfg, "127.0.0.1:1", "run", workers=1)
    assert [c.name for c in build_pipeline(via).conditions] == want
    keys = expected_keys(replay_cfg, ["r"])
    assert keys == {f"r|{c}|d3_px|{build_pipeline(via).detectors[0].card.version}" for c in want}

    # the gateway's settings (YAML file and LASTMILE_* variables share one model)
    raw = {"conditions": names, "detectors": "d3_px"} | ({"conditions_file": str(spec)} if spec else {})
    gw_yaml = files["tmp"] / "gateway.yaml"
    gw_yaml.write_text(yaml.safe_dump(raw))
    gw_conditions = build_pipeline(GatewayConfig.load(gw_yaml)).conditions
    assert [c.name for c in gw_conditions] == want
    assert _spatial_factor(gw_conditions) in (None, factor)
