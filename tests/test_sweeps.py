"""Beyond the six conditions: severity sweeps and repost chains declared as data, temporal edits as steps,
and the report's curves and breaking points."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from transforms.catalog import load_conditions_file, resolve_conditions
from transforms.engine import Engine
from transforms.errors import SpecError
from transforms.limits import Limits
from transforms.probe import probe
from transforms.spec import PROFILES, spec_hash
from transforms.sweeps import parse_sweep_name

SWEEP_FILE = {
    "sweeps": [{"base": "spatial", "step": "scale", "param": "factor", "values": [0.75, 0.5, 0.33, 0.25]}],
    "reposts": [{"base": "full", "hops": 2}],
}


def _file(tmp_path, content: dict):
    path = tmp_path / "conditions.yaml"
    path.write_text(yaml.safe_dump(content))
    return path


def test_a_sweep_and_a_repost_chain_expand_to_named_conditions_with_their_own_hashes(tmp_path):
    conditions, _ = resolve_conditions("all", _file(tmp_path, SWEEP_FILE))
    names = [c.name for c in conditions]
    assert names[:6] == ["original", "transcode", "spatial", "temporal", "presentation", "full"]
    assert names[6:] == [f"spatial@scale.factor={v}" for v in ("0.75", "0.5", "0.33", "0.25")] + ["full^2"]
    by = {c.name: c for c in conditions}
    assert [s.factor for s in by["spatial@scale.factor=0.33"].steps if s.kind == "scale"] == [0.33]
    assert by["full^2"].steps == by["full"].steps * 2
    hashes = {spec_hash(c, PROFILES["fidelity"]) for c in conditions}
    assert len(hashes) == len(conditions)
    assert parse_sweep_name("spatial@scale.factor=0.33") == ("spatial@scale.factor", 0.33)
    assert parse_sweep_name("full^2") is None


@pytest.mark.parametrize(
    "content, message",
    [
        ({"sweeps": [{"base": "nope", "step": "scale", "param": "factor", "values": [0.5]}]}, "unknown base"),
        ({"sweeps": [{"base": "temporal", "step": "scale", "param": "factor", "values": [0.5]}]}, "no 'scale' step"),
        ({"sweeps": [{"base": "spatial", "step": "scale", "param": "factor", "values": [1.5]}]}, "less than or equal"),
        ({"reposts": [{"base": "original", "hops": 2}]}, "no steps"),
    ],
)
def test_a_bad_sweep_or_repost_is_refused_clearly(tmp_path, content, message):
    with pytest.raises(SpecError, match=message):
        load_conditions_file(_file(tmp_path, content))


def test_shared_prefixes_are_encoded_once_across_the_sweep_and_the_repost_chain(tmp_path, media):
    conditions, _ = resolve_conditions(
        "original,full," + ",".join(f"spatial@scale.factor={v}" for v in ("0.75", "0.5", "0.33", "0.25")) + ",full^2",
        _file(tmp_path, SWEEP_FILE),
    )
    result = Engine(PROFILES["throughput"]).run(media["basic"], conditions)
    # VP9: once for the first hop of everything, once more for full^2's second hop. H.264: one per sweep point,
    # one for full (whose encode full^2's first hop shares, decoded again), one for full^2's output.
    assert result.encoder_sessions["libvpx-vp9"] == 2
    assert sum(v for k, v in result.encoder_sessions.items() if k != "libvpx-vp9") == 4 + 1 + 1
    widths = [result.variants[f"spatial@scale.factor={v}"].meta.width for v in ("0.75", "0.5", "0.33", "0.25")]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == 4
    twice = result.variants["full^2"].meta
    assert twice.codec_chain[1:] == ["libvpx-vp9", twice.codec_chain[2], "libvpx-vp9", twice.codec_chain[-1]]
    assert twice.fps == pytest.approx(8) and twice.width < result.variants["full"].meta.width


def test_temporal_edits_trim_speed_and_reorder(tmp_path, media):
    src = probe(media["long"], Limits())
    spec = {"conditions": [
        {"name": "trimmed", "steps": [{"kind": "trim", "start_s": 0.5, "duration_s": 1.0}, {"kind": "h264"}]},
        {"name": "fast", "steps": [{"kind": "speed", "factor": 1.25}, {"kind": "h264"}]},
        {"name": "slow", "steps": [{"kind": "speed", "factor": 0.75}, {"kind": "h264"}]},
        {"name": "shuffled", "steps": [{"kind": "reorder", "segment_s": 0.5, "seed": 3}, {"kind": "h264"}]},
    ]}  # fmt: skip
    conditions, _ = resolve_conditions("original,trimmed,fast,slow,shuffled", _file(tmp_path, spec))
    engine = Engine(PROFILES["throughput"].with_determinism(True))
    out = engine.run(media["long"], conditions).variants
    assert out["trimmed"].meta.duration_s == pytest.approx(1.0, abs=0.1)
    assert out["fast"].meta.duration_s == pytest.approx(src.duration_s / 1.25, rel=0.06)
    assert out["slow"].meta.duration_s == pytest.approx(src.duration_s / 0.75, rel=0.06)
    assert out["fast"].meta.frames == out["slow"].meta.frames == out["shuffled"].meta.frames == src.frames
    again = engine.run(media["long"], conditions).variants["shuffled"]
    assert again.data == out["shuffled"].data  # the permutation is seeded
    assert _first_frame_differs(out["shuffled"].data, media["long"])


def _first_frame_differs(a: bytes, b: bytes) -> bool:
    import io

    import av

    firsts = []
    for data in (a, b):
        with av.open(io.BytesIO(data)) as c:
            firsts.append(next(c.decode(video=0)).to_ndarray(format="gray").astype(float))
    return np.abs(firsts[0] - firsts[1]).mean() > 5


def test_a_sweep_and_a_repost_chain_in_one_replay_give_curves_and_breaking_points(tmp_path):
    import json

    from detectors.proxy.corpus import CorpusConfig, synthesize
    from gateway.batch.replay import ReplayConfig, replay
    from gateway.evaluation.report import build_report
    from gateway.ops.demo import DEMO_SEED, DEMO_SWEEPS

    manifest = synthesize(CorpusConfig(anchors=8, seed=DEMO_SEED), tmp_path / "corpus")
    points = [f"spatial@scale.factor={v}" for v in ("0.75", "0.5", "0.33", "0.25")]
    cfg = ReplayConfig(manifest=manifest, conditions_file=_file(tmp_path, DEMO_SWEEPS), detectors="npr,d3_px",
                       conditions=",".join(["original", *points, "full^2"]), profile="throughput")  # fmt: skip
    run = tmp_path / "run"
    replay(cfg, run, progress=False)
    build_report(run, replicates=400, flips=0)  # (its flips are not what it tests: no strip rendered)
    report = json.loads((run / "report.json").read_text())
    (sweep,) = report["sweeps"]
    assert sweep["sweep"] == "spatial@scale.factor" and sweep["values"] == [0.75, 0.5, 0.33, 0.25]
    npr = {p["value"]: p for p in sweep["points"] if p["detector"] == "npr"}
    assert npr[0.25]["auc_drift_ci"][1] < 0  # significantly below original, on the proxy corpus
    cells = {(c["detector"], c["condition"]): c for c in report["cells"]}
    assert npr[0.25]["auc"] == cells[("npr", "spatial@scale.factor=0.25")]["auc"]  # the same numbers
    assert ("npr", "full^2") in cells
    breaks = {b["detector"]: b for b in sweep["breaking_points"]}
    assert breaks["npr"]["auc_drift_below"] in sweep["values"]  # npr breaks somewhere in the sweep
    md = (run / "report.md").read_text()
    assert "Breaking points of the sweep spatial@scale.factor" in md and "sweep_spatial_scale_factor.png" in md
    html = (run / "report.html").read_text()
    assert "as scale.factor of spatial grows harsher" in html and html.count("data:image/png;base64,") == 6


def test_the_ffmpeg_cli_cross_check_refuses_what_only_the_engine_does(tmp_path):
    from transforms import ffmpeg_cli

    conditions, _ = resolve_conditions("full^2", _file(tmp_path, SWEEP_FILE))
    with pytest.raises(SpecError, match="engine only"):
        ffmpeg_cli.commands(tmp_path / "unused.mp4", conditions[0], PROFILES["throughput"], tmp_path)
