"""Replay a labelled manifest through the conditions and detectors into a results file.

Results are Parquet, one row per (video, condition, detector). Work is cut into chunks of videos; each
chunk's rows are written to ``parts/`` atomically (temporary name, then rename), so a killed run leaves only
whole chunks, and ``--resume`` redoes exactly the videos that no part holds: no duplicates, no gaps.
``results.parquet`` is the parts merged and sorted, byte-for-byte independent of how the run was split.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import sys
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

from pydantic import ConfigDict, Field
from tqdm import tqdm

from detectors.manifest import ManifestRow, read_manifest
from gateway.batch.results import done_videos, merge, write_part
from gateway.core import worker
from gateway.core.config import OPERATIONAL_LIMITS, PipelineSettings, SourceSettings
from gateway.core.worker import FetchRules, VideoRequest


class ReplayConfig(PipelineSettings):
    """Everything that determines a run's results (stored in ``run.json`` and checked on ``--resume``)."""

    model_config = ConfigDict(extra="forbid")
    manifest: Path
    file_roots: list[Path] = Field(
        default_factory=list, description="where the manifest's videos may be read; none: the manifest's folder"
    )

    def identity(self) -> str:
        """A hash of what changes results (not of how many workers run them, nor where files may be read)."""
        exclude = {"file_roots": True, "limits": set(OPERATIONAL_LIMITS)}
        return hashlib.sha256(self.model_dump_json(exclude=exclude).encode()).hexdigest()

    def fetch_rules(self) -> FetchRules:
        """The replay reads the files its manifest names, under ``file_roots`` (default: the manifest's folder)."""
        base = self.manifest.resolve().parent
        roots = self.file_roots or [base]
        return FetchRules(sources=SourceSettings(file_roots=roots), base=base, max_bytes=self.limits.max_bytes)


def requests(rows: list[ManifestRow]) -> list[VideoRequest]:
    """A manifest's rows as worker requests (URIs resolved by the worker against the manifest's folder)."""
    return [
        VideoRequest(video_id=r.video_id, uri=r.uri, label=r.label, source=r.source, anchor_id=r.anchor_id)
        for r in rows
    ]


# -- the run ------------------------------------------------------------------------------------------------
def replay(
    cfg: ReplayConfig,
    run_dir: Path,
    *,
    resume: bool = False,
    workers: int | None = None,
    chunk_size: int = 2,
    progress: bool = True,
) -> Path:
    """Run (or resume) a replay into ``run_dir``; return the path of ``results.parquet``."""
    rows = read_manifest(cfg.manifest)
    parts = run_dir / "parts"
    prepare_run(cfg, run_dir, resume, len(rows))
    done = done_videos(parts)
    pending = [(i, req) for i, req in enumerate(requests(rows)) if req.video_id not in done]
    chunks = [pending[i : i + chunk_size] for i in range(0, len(pending), chunk_size)]
    workers = max(1, min(workers or os.cpu_count() or 1, len(chunks) or 1))
    bar = tqdm(
        total=len(rows),
        initial=len(rows) - len(pending),
        desc="replay",
        unit="video",
        disable=not progress,
        file=sys.stderr,
    )
    ctx = mp.get_context("spawn")
    rules = cfg.fetch_rules()
    with ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=worker.init, initargs=worker.initargs(cfg, rules)
    ) as pool:
        for chunk, result in _bounded(pool, chunks, 2 * workers):
            write_part(parts, chunk[0][0], chunk[-1][0], result)
            bar.update(len(chunk))
    bar.close()
    return merge(run_dir)


def _bounded(pool: ProcessPoolExecutor, chunks: list, limit: int) -> Iterator[tuple[list, list[dict]]]:
    """Submit at most ``limit`` chunks at a time (bounded memory); yield them as they finish."""
    queue = iter(chunks)
    running: dict[Future, list] = {}

    def submit(chunk: list[tuple[int, VideoRequest]]) -> Future:
        return pool.submit(worker.run, [req for _, req in chunk])

    for chunk in queue:
        running[submit(chunk)] = chunk
        if len(running) >= limit:
            break
    while running:
        finished, _ = wait(running, return_when=FIRST_COMPLETED)
        for fut in finished:
            chunk = running.pop(fut)
            yield chunk, fut.result()
            nxt = next(queue, None)
            if nxt is not None:
                running[submit(nxt)] = nxt


def prepare_run(cfg: ReplayConfig, run_dir: Path, resume: bool, n_videos: int) -> None:
    meta = run_dir / "run.json"
    if meta.exists():
        old = json.loads(meta.read_text())
        if not resume:
            raise FileExistsError(
                f"{run_dir} holds a run already: pass --resume to continue it, or choose another --out"
            )
        if old["identity"] != cfg.identity():
            raise ValueError(f"{run_dir} was started with another configuration; it cannot be resumed with this one")
        return
    (run_dir / "parts").mkdir(parents=True, exist_ok=True)
    corpus_json = cfg.manifest.resolve().parent / "corpus.json"
    info = {
        "identity": cfg.identity(),
        "config": json.loads(cfg.model_dump_json()),
        "videos": n_videos,
        "manifest_sha256": hashlib.sha256(cfg.manifest.read_bytes()).hexdigest(),
        "corpus": json.loads(corpus_json.read_text()) if corpus_json.exists() else None,
    }
    meta.write_text(json.dumps(info, indent=2))
