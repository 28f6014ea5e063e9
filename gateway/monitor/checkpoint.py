"""Checkpoints of the monitor's store: a start loads the newest valid one and reads only the topics' tail.

A checkpoint is a directory ``ckpt-<unix ms>`` written as a temporary one and renamed (atomic): Arrow IPC files
of the per-video columns, of every series' rows (record batch i: series i of ``meta.json``) and of the waiting
labels, and
``meta.json`` with the per-partition positions it covers (the offset of the next record to read), the reader's
watermark state, the counters, the CRC32C of each file and the identity of the configuration that wrote it (the
topics and the window settings that decide what is held). A checkpoint that does not read back whole, or was
written under another identity, is refused with one log line, and the monitor rebuilds from the topics.

Memory: files are checked and read a chunk or a record batch at a time, so writing or loading a checkpoint holds
little beyond the store itself (a million videos' 24 million rows are about 310 MB on disk).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from gateway.monitor.config import MonitorConfig
from gateway.monitor.table import VIDEO_COLUMNS, Frame

log = logging.getLogger("lastmile.monitor")
# 2: no series column in rows.arrow (the batch's index); 1 is refused as another format
FORMAT = 2
PREFIX = "ckpt-"
FILES = ("videos.arrow", "rows.arrow", "waiting.arrow")
# topic, partition
Position = tuple[str, int]
# bytes read at a time to check a file's CRC32C
CHUNK = 8 << 20
ROWS_SCHEMA = pa.schema([("slot", pa.int32()), ("score", pa.float64()), ("decision", pa.bool_())])


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: unreadable, damaged, of another format or another configuration."""


@dataclass
class Checkpoint:
    frame: Frame
    waiting: dict[str, list[tuple[float, str]]]
    counters: dict[str, dict[str, int]]
    # the offset of the next record to read
    positions: dict[Position, int]
    # per score partition, the latest timestamp read
    seen: dict[Position, float]
    watermark: float
    created: float = 0.0
    path: Path | None = None


def identity(cfg: MonitorConfig) -> str:
    """What decides a store's content: a checkpoint of another identity is foreign."""
    k, w = cfg.kafka, cfg.windows
    keys = {
        "format": FORMAT,
        "topics": [k.output_topic, k.labels_topic],
        "windows": w.model_dump(
            include={"seconds", "label_ttl_s", "max_videos", "max_waiting_labels", "timestamp_skew_s"}
        ),
    }
    return hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:16]


def _write_table(path: Path, batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> str:
    with ipc.new_file(str(path), schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return _crc(path)


def _crc(path: Path) -> str:
    """The file's CRC32C, read a chunk at a time."""
    value = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            value = crc32c.crc32c(chunk, value)
    return format(value, "08x")


def write(directory: Path, ident: str, cp: Checkpoint, keep: int) -> Path:
    """Write ``cp`` atomically under ``directory``; older checkpoints past ``keep`` are removed."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{PREFIX}{int(cp.created * 1000):015d}"
    tmp = directory / f".tmp-{name}-{os.getpid()}"
    tmp.mkdir()
    f = cp.frame
    videos = pa.record_batch(
        [pa.array(f.ids, pa.string()), *(f.videos[k] for k in VIDEO_COLUMNS)], names=["video_id", *VIDEO_COLUMNS]
    )
    series = list(f.rows)
    rows = (pa.record_batch([slot, score, decision], schema=ROWS_SCHEMA) for slot, score, decision in f.rows.values())
    flat = [(vid, t, label) for vid, labels in cp.waiting.items() for t, label in labels]
    types = (pa.string(), pa.float64(), pa.string())
    waiting = pa.record_batch(
        [pa.array([x[i] for x in flat], typ) for i, typ in enumerate(types)], names=["video_id", "t", "label"]
    )
    crcs = {
        "videos.arrow": _write_table(tmp / "videos.arrow", [videos], videos.schema),
        "rows.arrow": _write_table(tmp / "rows.arrow", rows, ROWS_SCHEMA),
        "waiting.arrow": _write_table(tmp / "waiting.arrow", [waiting], waiting.schema),
    }
    meta = {
        "format": FORMAT,
        "identity": ident,
        "created": cp.created,
        "crc32c": crcs,
        "series": series,
        "positions": [[t, p, o] for (t, p), o in cp.positions.items()],
        "seen": [[t, p, s] for (t, p), s in cp.seen.items()],
        "watermark": cp.watermark,
        "counters": cp.counters,
    }
    (tmp / "meta.json").write_text(json.dumps(meta))
    final = directory / name
    os.rename(tmp, final)
    for old in sorted(directory.glob(f"{PREFIX}*"), reverse=True)[keep:]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def read(path: Path, ident: str) -> Checkpoint:
    """The checkpoint in ``path``; :class:`CheckpointError` saying why it cannot be used."""
    try:
        meta = json.loads((path / "meta.json").read_text())
        if meta.get("format") != FORMAT or meta.get("identity") != ident:
            raise CheckpointError(f"written by another configuration (identity {meta.get('identity')}, not {ident})")
        for name in FILES:
            if _crc(path / name) != meta["crc32c"][name]:
                raise CheckpointError(f"{name} is damaged (CRC32C mismatch)")
        v = ipc.open_file(pa.OSFile(str(path / "videos.arrow"))).read_all()
        videos = {k: v.column(k).to_numpy(zero_copy_only=False) for k in VIDEO_COLUMNS}
        ids = v.column("video_id").to_pylist()
        del v
        rows = _rows(path / "rows.arrow", meta["series"])
        pending = ipc.open_file(pa.OSFile(str(path / "waiting.arrow"))).read_all()
    except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
        raise CheckpointError(str(exc) or type(exc).__name__) from exc
    waiting: dict[str, list[tuple[float, str]]] = {}
    for vid, t, label in zip(*(pending.column(i).to_pylist() for i in range(3)), strict=True):
        waiting.setdefault(vid, []).append((t, label))
    return Checkpoint(
        Frame(ids, videos, rows),
        waiting,
        meta["counters"],
        {(t, p): o for t, p, o in meta["positions"]},
        {(t, p): s for t, p, s in meta["seen"]},
        meta["watermark"],
        meta["created"],
        path,
    )


def _rows(path: Path, series: list[list[str]]) -> dict[tuple[str, ...], tuple[np.ndarray, ...]]:
    """Each series' rows, a record batch at a time (batch i: ``series[i]``), as arrays of their own."""
    reader = ipc.open_file(pa.OSFile(str(path)))
    if reader.num_record_batches != len(series):
        raise CheckpointError(f"rows.arrow holds {reader.num_record_batches} series, meta.json names {len(series)}")
    rows = {}
    for i, key in enumerate(series):
        batch = reader.get_batch(i)
        if batch.num_rows:
            rows[tuple(key)] = tuple(np.array(batch.column(j).to_numpy(zero_copy_only=False)) for j in range(3))
    return rows


def newest(directory: Path, ident: str) -> Checkpoint | None:
    """The newest checkpoint that reads back whole under this identity; each refused one is logged once."""
    for path in sorted(directory.glob(f"{PREFIX}*"), reverse=True) if directory.is_dir() else ():
        t0 = time.perf_counter()
        try:
            cp = read(path, ident)
        except CheckpointError as exc:
            log.warning("checkpoint %s refused, not used: %s", path, exc)
            continue
        log.info("checkpoint %s loaded in %.2f s: %d videos", path, time.perf_counter() - t0, len(cp.frame.ids))
        return cp
    return None


class Checkpointer:
    """A running monitor's checkpoints: loaded once at the start, written every ``interval_s`` on a thread (the
    frame is taken on the reader's thread, so the positions are exactly those of what it holds)."""

    def __init__(self, cfg: MonitorConfig, store, clock) -> None:
        self.settings, self.store, self.clock = cfg.checkpoint, store, clock
        self.ident = identity(cfg)
        self._last = time.monotonic()
        self._writer: threading.Thread | None = None

    def load(self) -> Checkpoint | None:
        """Restore the store from the newest valid checkpoint (None: none, or no directory configured)."""
        cp = newest(self.settings.directory, self.ident) if self.settings.directory else None
        if cp is not None:
            self.store.restore(cp.frame, cp.waiting, cp.counters)
        return cp

    def due(self) -> bool:
        return self.settings.directory is not None and time.monotonic() - self._last >= self.settings.interval_s

    def save(self, positions: dict[Position, int], seen: dict[Position, float], watermark: float) -> None:
        """Start writing a checkpoint of the store now (skipped while the previous one is still being written)."""
        if self._writer is not None and self._writer.is_alive():
            return
        self._last = time.monotonic()
        frame, waiting, counters = self.store.saved()
        cp = Checkpoint(frame, waiting, counters, dict(positions), dict(seen), watermark, self.clock())
        self._writer = threading.Thread(target=self._write, args=(cp,), name="monitor-checkpoint", daemon=True)
        self._writer.start()

    def _write(self, cp: Checkpoint) -> None:
        try:
            path = write(self.settings.directory, self.ident, cp, self.settings.keep)
        except OSError as exc:
            log.warning("checkpoint not written: %s", exc)
            return
        log.info("checkpoint %s written: %d videos", path.name, len(cp.frame.ids))
