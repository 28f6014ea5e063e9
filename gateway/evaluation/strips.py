"""Frame strips of flipped videos (:mod:`gateway.evaluation.flips`): frames of the original above the same
moments of the variant, with both scores and the threshold, rendered again from what the run recorded.

The run's ``run.json`` holds its configuration: the manifest, the conditions, the encoder profile and its
determinism, the limits. A strip reads the video again from where the manifest says, under the replay's read rules
(the manifest's folder and ``file_roots``, the byte limit), checks the bytes against the row's ``input_sha256``,
renders the condition again with the run's engine settings, and checks the variant against the row's
``variant_sha256``. A strip is drawn only where both hold, so its frames are frames of the very variant the
detector was given (four spread evenly over it, not the detector's own sample). Where one does not (the file moved
or changed, a row without the hashes, a run that was not deterministic), the strip is left out and the reason
said: a strip never fails a report.

A source the replay fetched over ``http(s)://`` is fetched again only when asked (``fetch_urls``): a report reads a
run folder, which may come from elsewhere, and its ``run.json`` names the hosts. Local files are read under the
roots the run names, as its replay did.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from gateway.core.sources import ContentMismatch, check_digest, is_web_url
from gateway.evaluation.flips import Flip
from transforms.limits import Limits

# frames per row of a strip
FRAMES = 4
# pixels of each frame; the width keeps the source's aspect
HEIGHT = 112
GAP = 4
# pixels above each row for its caption
CAPTION = 22
# the caption's font size: readable at 100% zoom
CAPTION_PX = 14
# under the run folder
FOLDER = "flips"
# videos rendered at once: each rendering may hold an engine's encoders (limits.max_encoder_mb)
MAX_WORKERS = 4


@dataclass(frozen=True)
class Strip:
    """A flip's strip (``path``, relative to the run folder) or, where none could be drawn, why (``note``)."""

    flip: Flip
    path: Path | None
    note: str | None = None


class StripError(ValueError):
    """A run whose videos cannot be rendered again: no ``run.json``, or a configuration this version cannot read."""


class RunRenderer:
    """Renders a run's variants again, as its replay did (see the module's docstring)."""

    def __init__(self, run_dir: Path, fetch_urls: bool = False) -> None:
        from gateway.batch.replay import ReplayConfig
        from transforms.engine import Engine

        self.run_dir = run_dir
        meta = run_dir / "run.json"
        try:
            info = json.loads(meta.read_text())
            config = _absolute(info["config"], Path(info.get("cwd") or Path.cwd()))
            self.cfg = ReplayConfig.model_validate(config)
            conditions, profile = self.cfg.resolve_conditions()
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise StripError(f"{meta}: cannot render this run's variants again: {exc}") from None
        self.conditions = {c.name: c for c in conditions}
        self.engine = Engine(profile.with_determinism(self.cfg.deterministic), self.cfg.limits)
        self.fetch_urls = fetch_urls
        self._uris: dict[str, str] | None = None

    def uris(self) -> dict[str, str]:
        """The manifest's URI of each video."""
        if self._uris is None:
            from detectors.manifest import read_manifest

            self._uris = {r.video_id: r.uri for r in read_manifest(self.cfg.manifest)}
        return self._uris

    def strips(self, flips: Iterable[Flip], workers: int | None = None) -> list[Strip]:
        """A strip per flip, in the order given. Each video is read and rendered once, for all its conditions; on
        ``workers`` threads (None: one per CPU, at most ``MAX_WORKERS``) where there is more than one video."""
        flips = list(flips)
        workers = workers or min(os.cpu_count() or 1, MAX_WORKERS)
        by_video: dict[str, list[int]] = defaultdict(list)
        for i, f in enumerate(flips):
            by_video[f.video_id].append(i)
        groups = [[flips[i] for i in idx] for idx in by_video.values()]
        if workers > 1 and len(groups) > 1:
            # threads: the decoders and encoders release the GIL, as the engine's do
            with ThreadPoolExecutor(min(workers, len(groups)), thread_name_prefix="lastmile-strips") as pool:
                drawn = list(pool.map(self.video_strips, groups))
        else:
            drawn = [self.video_strips(g) for g in groups]
        out: list[Strip | None] = [None] * len(flips)
        for idx, strips in zip(by_video.values(), drawn, strict=True):
            for i, s in zip(idx, strips, strict=True):
                out[i] = s
        return [s for s in out if s is not None]

    def video_strips(self, flips: list[Flip]) -> list[Strip]:
        """The strips of one video's flips: it is read, rendered and its own frames drawn once, for all of them.
        Whatever goes wrong with one video is its strips' note, never an exception (a report is not failed by a
        strip)."""
        from transforms.errors import VideoError

        source, variants, why = self._render(flips[0].video_id, {f.condition for f in flips})
        # the source's size and frames, once drawn
        original: tuple[tuple[int, int], np.ndarray] | None = None
        out = []
        for f in flips:
            note = why
            if note is None and not (f.input_sha256 and f.variant_sha256):
                note = "its rows record no input or variant sha256 to check a rendering against"
            elif note is None and not _is_input(source, f.input_sha256):
                note = f"the video read again is not the run's input (sha256 {f.input_sha256[:12]}...): it changed"
            elif note is None and f.condition not in variants:
                note = f"{f.condition} is not a condition of this run's configuration"
            elif note is None and variants[f.condition][1] != f.variant_sha256:
                note = (
                    f"rendered again, {f.condition} hashes to {variants[f.condition][1][:12]}, not the row's "
                    f"{f.variant_sha256[:12]}" + ("" if self.cfg.deterministic else " (the run was not deterministic)")
                )
            if note is None:
                try:
                    if original is None:
                        size = frame_size(source, self.cfg.limits)
                        original = size, frames(source, size, self.cfg.limits)
                    out.append(Strip(f, self._draw(f, *original, variants[f.condition][0])))
                    continue
                except (VideoError, OSError, ValueError) as exc:
                    note = f"cannot draw its frames: {exc}"
            out.append(Strip(f, None, note))
        return out

    def _render(self, video_id: str, conditions: set[str]) -> tuple[bytes, dict[str, tuple[bytes, str]], str | None]:
        """The video's bytes and its variants ``{condition: (bytes, sha256)}``, or why there are none."""
        from transforms.errors import VideoError

        try:
            uri = self.uris().get(video_id)
        except ValueError as exc:
            # a ManifestError: the manifest moved, or cannot be read
            return b"", {}, f"cannot read the run's manifest again: {exc}"
        if uri is None:
            return b"", {}, f"{video_id} is not in the run's manifest ({self.cfg.manifest})"
        if is_web_url(uri) and not self.fetch_urls:
            return (
                b"",
                {},
                f"{uri} was fetched over the network: `lastmile flips --strips --fetch-urls` fetches it again",
            )
        try:
            data = self.cfg.fetch_rules().fetch(uri)
        except (VideoError, OSError, ValueError) as exc:
            # missing, outside the roots, over the limit, a host refused
            return b"", {}, f"cannot read {uri} again: {exc}"
        known = [c for c in conditions if c in self.conditions]
        try:
            result = self.engine.run(data, [self.conditions[c] for c in sorted(known)])
        except VideoError as exc:
            return data, {}, f"cannot render {uri} again: {exc}"
        return data, {name: (v.data, v.meta.sha256) for name, v in result.variants.items()}, None

    def _draw(self, flip: Flip, size: tuple[int, int], original: np.ndarray, variant: bytes) -> Path:
        """The strip of ``flip``: the source's frames ``original`` (at ``size``) above the variant's, under the run's
        limits (a run with raised limits reads its longer videos again)."""
        rows = [original, frames(variant, size, self.cfg.limits)]
        captions = [
            f"original: score {flip.original_score:+.3f} -> {_verdict(flip.original_decision)} "
            f"(threshold {flip.original_threshold:+.3f})",
            f"{flip.condition}: score {flip.variant_score:+.3f} -> {_verdict(flip.variant_decision)} "
            f"(threshold {flip.variant_threshold:+.3f})",
        ]
        image = compose(rows, captions)
        series = safe_name(f"{flip.detector}@{flip.detector_version}")
        relative = Path(FOLDER) / series / safe_name(flip.condition) / f"{safe_name(flip.video_id)}.png"
        target = self.run_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        image.save(target, optimize=True)
        return relative


def _is_input(data: bytes, sha256: str) -> bool:
    """Whether ``data`` are the bytes the run read (the digest rule of every read: :func:`check_digest`)."""
    try:
        check_digest(data, sha256)
    except ContentMismatch:
        return False
    return True


def _verdict(decision: bool) -> str:
    return "generated" if decision else "real"


def _absolute(config: dict, base: Path) -> dict:
    """``config`` with its relative paths (the manifest, a conditions file, file roots) taken from ``base``, the
    folder the replay ran in."""
    out = dict(config)
    for key in ("manifest", "conditions_file"):
        if out.get(key) and not Path(out[key]).is_absolute():
            out[key] = str(base / out[key])
    out["file_roots"] = [str(base / r) if not Path(r).is_absolute() else r for r in out.get("file_roots") or []]
    return out


def safe_name(name: str) -> str:
    """A file or folder name for ``name`` (a video id, a detector, a condition): its safe characters, and a short
    hash of the whole, so that two names never share one (``full^2`` and ``full_2`` differ)."""
    stem = re.sub(r"[^A-Za-z0-9@._-]", "_", name)[:60].lstrip(".") or "_"
    return f"{stem}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def frame_size(source: bytes, limits: Limits | None = None, height: int = HEIGHT) -> tuple[int, int]:
    """(width, height) of a strip's frames: ``height`` pixels high, the source's aspect kept."""
    from transforms.probe import probe

    info = probe(source, limits or Limits())
    return max(8, round(height * info.width / max(1, info.height) / 2) * 2), height


def frames(data: bytes, size: tuple[int, int], limits: Limits | None = None, count: int = FRAMES) -> np.ndarray:
    """``count`` frames spread evenly over the video, at ``size`` (the same for the original and its variant, so
    a downscaled variant is shown at the original's size), under the run's ``limits``."""
    from transforms.sampling import SamplingPolicy, sample_frames

    policy = SamplingPolicy(mode="uniform", frames=count, width=size[0], height=size[1], resize="stretch")
    return sample_frames(data, policy, limits)


def compose(rows: list[np.ndarray], captions: list[str]) -> Image.Image:
    """The rows of frames one above the other, each under its caption, on white."""
    t, h, w, _ = rows[0].shape
    width = t * w + (t - 1) * GAP
    image = Image.new("RGB", (width, len(rows) * (CAPTION + h + GAP)), "white")
    draw = ImageDraw.Draw(image)
    # Pillow's own scalable font: no font file to find
    font = ImageFont.load_default(size=CAPTION_PX)
    for i, (row, caption) in enumerate(zip(rows, captions, strict=True)):
        top = i * (CAPTION + h + GAP)
        draw.text((2, top + 2), caption, fill=(20, 20, 20), font=font)
        for j, frame in enumerate(row):
            image.paste(Image.fromarray(frame), (j * (w + GAP), top + CAPTION))
    return image
