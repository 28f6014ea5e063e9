"""Frame strips of flipped videos (gateway.evaluation.strips), on a real clip of the examples: drawn only where
the video read again and its variant rendered again hash to what the rows recorded; every other case (the file
gone or changed, a row without hashes, a source fetched over the network, an unreadable run.json) a reason,
never an exception."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from gateway.batch.replay import ReplayConfig
from gateway.evaluation.flips import Flip
from gateway.evaluation.strips import RunRenderer, StripError, compose, frame_size, frames
from transforms.engine import Engine

CLIP = Path(__file__).resolve().parents[1] / "examples" / "videos" / "a7_0000.mp4"


@pytest.fixture(scope="module")
def rendered() -> tuple[bytes, bytes]:
    """The clip and its ``full`` variant, as a replay at the throughput profile makes them."""
    cfg = ReplayConfig(manifest=CLIP, conditions="original,full", profile="throughput")
    conditions, profile = cfg.resolve_conditions()
    full = next(c for c in conditions if c.name == "full")
    data = CLIP.read_bytes()
    return data, Engine(profile.with_determinism(True), cfg.limits).run(data, [full]).variants["full"].data


def _run(tmp_path: Path, uri: str = "videos/clip.mp4", relative: bool = True) -> Path:
    """A run folder whose run.json names a manifest of the one clip, as `lastmile replay` writes it."""
    corpus = tmp_path / "corpus"
    (corpus / "videos").mkdir(parents=True)
    shutil.copyfile(CLIP, corpus / "videos" / "clip.mp4")
    row = {"video_id": "clip", "uri": uri, "label": "real", "source": "real", "anchor_id": "clip"}
    (corpus / "manifest.jsonl").write_text(json.dumps(row) + "\n")
    manifest = "corpus/manifest.jsonl" if relative else str(corpus / "manifest.jsonl")
    cfg = ReplayConfig(manifest=manifest, conditions="original,full", profile="throughput")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"config": json.loads(cfg.model_dump_json()), "cwd": str(tmp_path)}))
    return run


def _flip(data: bytes, variant: bytes, **change) -> Flip:
    fields = dict(
        video_id="clip", label="real", anchor_id="clip", detector="npr", detector_version="1", condition="full",
        direction="real_to_generated", original_score=-1.0, variant_score=2.0, original_threshold=0.0,
        variant_threshold=0.0, original_decision=False, variant_decision=True,
        input_sha256=hashlib.sha256(data).hexdigest(), variant_sha256=hashlib.sha256(variant).hexdigest(),
        spec_hash=None,
    )  # fmt: skip
    return Flip(**fields | change)


def test_a_strip_shows_the_variant_that_hashes_to_the_rows(tmp_path, rendered):
    data, variant = rendered
    run = _run(tmp_path)  # run.json's paths relative to the folder the replay ran in (its cwd), not to here
    (strip,) = RunRenderer(run).strips([_flip(data, variant)], workers=2)
    assert strip.note is None and strip.path.parts[0] == "flips"
    image = np.asarray(Image.open(run / strip.path).convert("RGB"))
    size = frame_size(data)
    want = np.asarray(compose([frames(data, size), frames(variant, size)], ["", ""]))
    assert image.shape == want.shape
    lower = slice(image.shape[0] - size[1] - 4, image.shape[0] - 4)  # the variant's frames
    assert np.array_equal(image[lower], want[lower])


def test_every_failure_is_a_reason_and_no_strip(tmp_path, rendered):
    data, variant = rendered
    run = _run(tmp_path, relative=False)
    renderer = RunRenderer(run)
    other = hashlib.sha256(b"another rendering").hexdigest()
    cases = {
        "rendered again, full hashes to": _flip(data, variant, variant_sha256=other),
        "record no input or variant sha256": _flip(data, variant, variant_sha256=None),
        "is not in the run's manifest": _flip(data, variant, video_id="gone"),
        "is not a condition of this run": _flip(data, variant, condition="temporal"),
    }
    for reason, flip in cases.items():
        (strip,) = renderer.strips([flip])
        assert strip.path is None and reason in strip.note, (reason, strip.note)
    (tmp_path / "corpus" / "videos" / "clip.mp4").write_bytes(data[:-10] + b"0123456789")  # changed since
    (strip,) = RunRenderer(run).strips([_flip(data, variant)])
    assert "it changed" in strip.note
    (tmp_path / "corpus" / "videos" / "clip.mp4").unlink()  # gone since
    (strip,) = RunRenderer(run).strips([_flip(data, variant)])
    assert strip.path is None and strip.note.startswith("cannot read videos/clip.mp4 again")
    (tmp_path / "corpus" / "manifest.jsonl").unlink()
    (strip,) = RunRenderer(run).strips([_flip(data, variant)])
    assert strip.note.startswith("cannot read the run's manifest again")
    assert not (run / "flips").exists()


def test_a_source_fetched_over_the_network_is_not_fetched_again_unless_asked(tmp_path, rendered):
    data, variant = rendered
    run = _run(tmp_path, uri="http://127.0.0.1:9/clip.mp4")
    (strip,) = RunRenderer(run).strips([_flip(data, variant)])
    assert strip.path is None and "--fetch-urls" in strip.note
    (strip,) = RunRenderer(run, fetch_urls=True).strips([_flip(data, variant)])
    assert "cannot read http://127.0.0.1:9/clip.mp4 again" in strip.note  # asked: the run's allow-list refuses it


def test_a_run_json_that_cannot_be_read_is_a_typed_error(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(StripError, match="cannot render this run's variants again"):
        RunRenderer(run)
    (run / "run.json").write_text('{"config": {"manifest": 3, "profile": "nope"}}')
    with pytest.raises(StripError):
        RunRenderer(run)
