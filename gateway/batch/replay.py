"""Replay a labelled manifest through the conditions and detectors into a results file.

Results are Parquet, one row per (video, condition, detector). Work is cut into chunks of videos; each
chunk's rows are written to ``parts/`` atomically (temporary name, then rename), so a killed run leaves only
whole chunks, and ``--resume`` redoes exactly the videos that no part holds: no duplicates, no gaps.
``results.parquet`` is the parts merged and sorted, byte-for-byte independent of how the run was split.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from pydantic import ConfigDict, Field
from tqdm import tqdm

from detectors.manifest import ManifestRow, read_manifest
from detectors.proxy.corpus import marked_description
from gateway import VERSION
from gateway.batch.results import done_videos, drop_infra_videos, merge, write_part
from gateway.core.config import OPERATIONAL_LIMITS, AllowHosts, ObjectStores, PipelineSettings, SourceSettings
from gateway.core.messages import ScoreRow, VideoFacts
from gateway.core.wording import counted
from gateway.scoring.assembly import build_pipeline
from gateway.scoring.pipeline import Pipeline
from gateway.scoring.supervisor import Supervisor
from gateway.scoring.worker import ENTRY, Entry, FetchRules, VideoRequest

# what does not change a run's results: how many workers, where files may be read, where a GPU computes
IDENTITY_EXCLUDE = {
    "file_roots": True,
    "http_allow_hosts": True,
    "object_stores": True,
    "triton_startup_timeout_s": True,
    "chat_cache": True,  # (a cached reply is the reply the request got)
    "limits": set(OPERATIONAL_LIMITS),
    "onnxruntime": {"device_id", "gpu_mem_limit", "trt_engine_cache_path"},  # where, not what, it computes
}


class ReplayConfig(PipelineSettings):
    """Everything that determines a run's results (stored in ``run.json`` and checked on ``--resume``)."""

    model_config = ConfigDict(extra="forbid")
    manifest: Path
    file_roots: list[Path] = Field(
        default_factory=list, description="folders the manifest's videos may be read from, besides its own folder"
    )
    http_allow_hosts: AllowHosts = Field(
        default_factory=list, description="hosts the manifest's http(s):// videos may be fetched from; none: no host"
    )

    object_stores: ObjectStores = Field(
        default_factory=list,
        description="prefixes the manifest's s3://, az:// and gs:// videos may be read under; none: no object",
    )

    def identity(self) -> str:
        """A hash of what changes results (not of how many workers run them, nor where files may be read)."""
        return hashlib.sha256(self.model_dump_json(exclude=IDENTITY_EXCLUDE).encode()).hexdigest()

    def differences(self, stored: dict | None) -> list[str]:
        """Each setting that changes results (those :meth:`identity` hashes) whose value differs from ``stored``, a
        run's recorded configuration (its run.json's ``config``), as ``key: THEN then, NOW now``."""
        now = _flat(json.loads(self.model_dump_json(exclude=IDENTITY_EXCLUDE)))
        then = _flat(_without(stored or {}, IDENTITY_EXCLUDE))
        unset = object()
        return [
            f"{key}: {_shown(then.get(key, unset))} then, {_shown(now.get(key, unset))} now"
            for key in sorted(now.keys() | then.keys())
            if then.get(key, unset) != now.get(key, unset)
        ]

    def fetch_rules(self) -> FetchRules:
        """The replay reads the files its manifest names, under the manifest's folder and ``file_roots``, and its
        URLs from ``http_allow_hosts``, its objects under ``object_stores`` (the SDKs' endpoints and credentials from
        their environment)."""
        base = self.manifest.resolve().parent
        sources = SourceSettings(
            file_roots=[base, *self.file_roots],
            http_allow_hosts=self.http_allow_hosts,
            object_stores=self.object_stores,
        )
        return FetchRules(sources=sources, base=base, max_bytes=self.limits.max_bytes)


def requests(rows: list[ManifestRow]) -> list[VideoRequest]:
    """A manifest's rows as worker requests (URIs resolved by the worker against the manifest's folder; a row's
    ``sha256`` checked against the bytes read)."""
    return [VideoRequest(**VideoFacts.of(r), uri=r.uri, sha256=r.sha256) for r in rows]


# -- the run ------------------------------------------------------------------------------------------------
START_GRACE_S = 120.0  # how long workers may fail to start before the videos waiting for them become infra rows


def replay(
    cfg: ReplayConfig,
    run_dir: Path,
    *,
    resume: bool = False,
    workers: int | None = None,
    chunk_size: int = 2,
    progress: bool = True,
    start_grace_s: float = START_GRACE_S,
    entry: Entry = ENTRY,
) -> Path:
    """Run (or resume) a replay into ``run_dir``; return the path of ``results.parquet``.

    Every failure is rows, never an aborted run: a bad video's rows carry its error, a video whose attempts all
    failed (``max_attempts``) carries ``WorkerCrashed``, ``VideoTimeout`` or ``JobError`` (an unexpected
    exception), and an unavailable scorer gives ``infra`` rows, which ``resume`` runs again. ``entry``: what the
    worker processes run (:data:`gateway.scoring.worker.ENTRY`).
    """
    rows = read_manifest(cfg.manifest)
    rows_for = build_pipeline(cfg, runtimes=False)  # fails at once, before the run folder, if it cannot start
    parts = run_dir / "parts"
    prepare_run(cfg, run_dir, resume, rows)
    if resume:
        drop_infra_videos(parts)
    done = done_videos(parts)
    pending = [(i, req) for i, req in enumerate(requests(rows)) if req.video_id not in done]
    chunks = [pending[i : i + chunk_size] for i in range(0, len(pending), chunk_size)]
    workers = max(1, min(workers or os.cpu_count() or 1, len(pending) or 1))
    bar = tqdm(total=len(rows), initial=len(rows) - len(pending), desc="replay", unit="video", disable=not progress)
    for chunk, result in _run_chunks(cfg, rows_for, chunks, workers, start_grace_s, entry):
        write_part(parts, chunk[0][0], chunk[-1][0], result)
        bar.update(len(chunk))
    bar.close()
    return merge(run_dir)


def _run_chunks(
    cfg: ReplayConfig, rows_for: Pipeline, chunks: list, workers: int, grace_s: float, entry: Entry
) -> Iterator[tuple[list, list[dict]]]:
    """Each chunk's rows once all its videos have a fate (:mod:`gateway.scoring.supervisor`); at most
    ``2 * workers`` chunks open (bounded memory). Every fate is rows here: a video told to retry later keeps its
    infra rows, which ``--resume`` runs again. ``rows_for``: the pipeline without runtimes, for the parent's rows."""
    if not chunks:
        return
    supervisor = Supervisor(cfg, cfg.fetch_rules(), workers, rows_for, entry)
    waiting, open_chunks = deque(chunks), []
    results: dict[str, list[ScoreRow]] = {}
    try:
        while waiting or open_chunks:
            while waiting and len(open_chunks) < 2 * workers:
                open_chunks.append(chunk := waiting.popleft())
                for _, req in chunk:
                    supervisor.submit(req.video_id, req)
            for video_id, fate in supervisor.poll(0.2) + supervisor.stalled(grace_s):
                results[video_id] = fate.rows
            for chunk in [c for c in open_chunks if all(req.video_id in results for _, req in c)]:
                open_chunks.remove(chunk)
                yield chunk, [row.model_dump() for _, req in chunk for row in results.pop(req.video_id)]
    finally:
        supervisor.close()


def reals_only_notice(path: Path, rows: list[ManifestRow]) -> str | None:
    """What a replay of a manifest without a generated video says first: its report measures RealR and its drift
    only (AUC and FakeR need generated videos paired with real anchors). None where the manifest has one."""
    if any(r.label == "generated" for r in rows):
        return None
    return (
        f"{path} has no generated video, only {counted(len(rows), 'real one')}: `lastmile report` will measure "
        "RealR and its drift per condition only (AUC and FakeR need generated videos paired with real anchors)"
    )


def check_out(cfg: ReplayConfig, run_dir: Path, resume: bool) -> bool:
    """Whether ``run_dir`` holds a run that ``cfg`` resumes (False: a new run). Raises :class:`FileExistsError`
    where it holds one and ``resume`` is not asked for, ValueError where that run has another configuration."""
    meta = run_dir / "run.json"
    if not meta.exists():
        return False
    if not resume:
        raise FileExistsError(f"{run_dir} holds a run already: pass --resume to continue it, or choose another --out")
    recorded = json.loads(meta.read_text())
    if recorded.get("identity") != cfg.identity():
        differs = cfg.differences(recorded.get("config")) if isinstance(recorded.get("config"), dict) else []
        why = "; ".join(differs) if differs else (
            "its run.json records no such setting, or the same ones: it was started by another version of lastmile"
        )  # fmt: skip
        raise ValueError(f"{run_dir} was started with another configuration; it cannot be resumed with this one: {why}")
    return True


def _flat(tree: dict, prefix: str = "") -> dict[str, object]:
    """A nested configuration as ``a.b.c: value`` pairs."""
    out: dict[str, object] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[prefix + key] = value
    return out


def _without(tree: dict, exclude: dict) -> dict:
    """``tree`` less the keys ``exclude`` names as pydantic's ``exclude`` does (True: the key; a set: its keys)."""
    out = {}
    for key, value in tree.items():
        drop = exclude.get(key)
        if drop is True:
            continue
        out[key] = {k: v for k, v in value.items() if k not in drop} if drop and isinstance(value, dict) else value
    return out


def _shown(value: object) -> str:
    return "unset" if not isinstance(value, str | int | float | bool | list | dict | type(None)) else json.dumps(value)


IN_PROCESS = "in process (workers of this replay)"


def prepare_run(
    cfg: ReplayConfig, run_dir: Path, resume: bool, rows: list[ManifestRow], route: str = IN_PROCESS
) -> None:
    """Check ``run_dir`` out for ``cfg`` (:func:`check_out`) and, for a new run, write its ``run.json``: what it
    computes, its manifest and corpus, and the ``route`` its videos took to the detectors."""
    meta = run_dir / "run.json"
    if check_out(cfg, run_dir, resume):  # resumed: a killed --via kafka run finished in process says both
        info = json.loads(meta.read_text())
        if not info.get("route", "").endswith(route):
            info["route"] = f"{info.get('route') or 'not recorded'}; resumed {route}"
            meta.write_text(json.dumps(info, indent=2))
        return
    (run_dir / "parts").mkdir(parents=True, exist_ok=True)
    info = {
        "identity": cfg.identity(),
        "config": json.loads(cfg.model_dump_json()),
        "conditions": [c.name for c in cfg.resolve_conditions()[0]],  # resolved, in order (sweeps as listed)
        "videos": len(rows),
        "manifest_sha256": hashlib.sha256(cfg.manifest.read_bytes()).hexdigest(),
        "cwd": str(Path.cwd()),  # what the config's relative paths are relative to (strips render videos again)
        "gateway_version": VERSION,
        "route": route,
        "corpus": corpus_of(cfg.manifest, rows),
    }
    meta.write_text(json.dumps(info, indent=2))


def corpus_of(manifest: Path, rows: list[ManifestRow]) -> dict | None:
    """What the run records of its corpus: the ``corpus.json`` beside the manifest; else, where the manifest's
    rows are marked as the proxy corpus's (a manifest moved, or mixed with other videos), its notice; else None."""
    described = manifest.resolve().parent / "corpus.json"
    if described.exists():
        return json.loads(described.read_text())
    return marked_description(rows, f"no corpus.json beside {manifest.name}: its rows are marked")
