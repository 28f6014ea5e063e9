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

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ConfigDict
from tqdm import tqdm

from detectors.manifest import ManifestRow, read_manifest
from gateway.core.config import PipelineSettings
from gateway.core.messages import ScoreRow, VideoItem
from gateway.core.sources import fetch
from transforms.errors import VideoError

RESULTS = "results.parquet"
SORT_KEYS = ["video_id", "condition", "detector", "detector_version"]


class ReplayConfig(PipelineSettings):
    """Everything that determines a run's results (stored in ``run.json`` and checked on ``--resume``)."""

    model_config = ConfigDict(extra="forbid")
    manifest: Path

    def identity(self) -> str:
        """A hash of what changes results (not of how many workers run them)."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


def schema() -> pa.Schema:
    types = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
    fields = []
    for name, info in ScoreRow.model_fields.items():
        ann = info.annotation
        base = next((t for t in types if ann is t or t in getattr(ann, "__args__", ())), str)
        fields.append(pa.field(name, types[base]))
    return pa.schema(fields)


# -- workers ------------------------------------------------------------------------------------------------
_PIPELINE = None
_BASE: Path | None = None


def _init_worker(cfg_json: str) -> None:
    global _PIPELINE, _BASE
    from gateway.core.assembly import build_pipeline

    cfg = ReplayConfig.model_validate_json(cfg_json)
    _PIPELINE = build_pipeline(cfg)
    _BASE = cfg.manifest.resolve().parent


def _process_chunk(chunk: list[tuple[int, dict]]) -> list[dict]:
    rows: list[dict] = []
    for _, raw in chunk:
        row = ManifestRow.model_validate(raw)
        rows += [r.model_dump() for r in process_row(_PIPELINE, row, _BASE)]
    return rows


def process_row(pipeline, row: ManifestRow, base: Path) -> list[ScoreRow]:
    """Fetch one manifest row's bytes and run it through the pipeline (a fetch failure is this video's error)."""
    meta = dict(video_id=row.video_id, label=row.label, source=row.source, anchor_id=row.anchor_id)
    try:
        data = fetch(row.uri, base, max_bytes=pipeline.limits.max_bytes)
    except VideoError as exc:
        return pipeline.error_rows(VideoItem(data=b"", **meta), exc)
    return pipeline.process(VideoItem(data=data, **meta))


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
    _prepare(cfg, run_dir, resume, len(rows))
    done = _done_videos(parts)
    pending = [(i, r.model_dump()) for i, r in enumerate(rows) if r.video_id not in done]
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
    with ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_init_worker, initargs=(cfg.model_dump_json(),)
    ) as pool:
        for chunk, result in _bounded(pool, chunks, 2 * workers):
            _write_part(parts, chunk, result)
            bar.update(len(chunk))
    bar.close()
    return merge(run_dir)


def _bounded(pool: ProcessPoolExecutor, chunks: list, limit: int) -> Iterator[tuple[list, list[dict]]]:
    """Submit at most ``limit`` chunks at a time (bounded memory); yield them as they finish."""
    queue = iter(chunks)
    running: dict[Future, list] = {}
    for chunk in queue:
        running[pool.submit(_process_chunk, chunk)] = chunk
        if len(running) >= limit:
            break
    while running:
        finished, _ = wait(running, return_when=FIRST_COMPLETED)
        for fut in finished:
            chunk = running.pop(fut)
            yield chunk, fut.result()
            nxt = next(queue, None)
            if nxt is not None:
                running[pool.submit(_process_chunk, nxt)] = nxt


def _prepare(cfg: ReplayConfig, run_dir: Path, resume: bool, n_videos: int) -> None:
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


def _done_videos(parts: Path) -> set[str]:
    done: set[str] = set()
    for part in sorted(parts.glob("part-*.parquet")):
        done |= set(pq.read_table(part, columns=["video_id"]).column("video_id").to_pylist())
    return done


def _write_part(parts: Path, chunk: list[tuple[int, dict]], rows: list[dict]) -> None:
    first, last = chunk[0][0], chunk[-1][0]
    target = parts / f"part-{first:07d}-{last:07d}.parquet"
    tmp = target.with_suffix(".tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema()), tmp)
    os.replace(tmp, target)  # atomic: a killed run leaves whole parts or none


def merge(run_dir: Path) -> Path:
    parts = sorted((run_dir / "parts").glob("part-*.parquet"))
    table = pa.concat_tables([pq.read_table(p, schema=schema()) for p in parts]) if parts else schema().empty_table()
    keys = [tuple(r) for r in zip(*(table.column(k).to_pylist() for k in SORT_KEYS), strict=True)]
    if len(set(keys)) != len(keys):
        raise RuntimeError("duplicate (video, condition, detector) rows in the parts: the run directory is corrupt")
    table = table.sort_by([(k, "ascending") for k in SORT_KEYS])
    out = run_dir / RESULTS
    pq.write_table(table, out.with_suffix(".tmp"))
    os.replace(out.with_suffix(".tmp"), out)
    return out


def read_results(path: Path) -> list[ScoreRow]:
    return [ScoreRow.model_validate(r) for r in pq.read_table(path).to_pylist()]
