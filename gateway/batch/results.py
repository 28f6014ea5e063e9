"""The results store of a replay: Parquet, one row per (video, condition, detector), written in atomic parts.

Each chunk of videos is written to ``parts/`` under a temporary name, then renamed, so a killed run leaves
only whole parts; ``results.parquet`` is the parts merged and sorted, byte-for-byte independent of how the
run was split.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gateway.core.messages import ScoreRow

RESULTS = "results.parquet"
SORT_KEYS = ["video_id", "condition", "detector", "detector_version"]


def schema() -> pa.Schema:
    types = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
    fields = []
    for name, info in ScoreRow.model_fields.items():
        ann = info.annotation
        base = next((t for t in types if ann is t or t in getattr(ann, "__args__", ())), str)
        fields.append(pa.field(name, types[base]))
    return pa.schema(fields)


def done_videos(parts: Path) -> set[str]:
    done: set[str] = set()
    for part in sorted(parts.glob("part-*.parquet")):
        done |= set(pq.read_table(part, columns=["video_id"]).column("video_id").to_pylist())
    return done


def write_part(parts: Path, first: int, last: int, rows: list[dict]) -> None:
    """Rows of the videos ``first``..``last`` (manifest order) as one new part, atomically."""
    target, n = parts / f"part-{first:07d}-{last:07d}.parquet", 1
    while target.exists():  # a resumed run re-runs videos of an existing part: a part of its own
        target, n = parts / f"part-{first:07d}-{last:07d}-r{n}.parquet", n + 1
    _write_atomically(pa.Table.from_pylist(rows, schema=schema()), target)


def _write_atomically(table: pa.Table, target: Path) -> None:
    tmp = target.with_suffix(".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, target)  # atomic: a killed run leaves whole parts or none


def drop_infra_videos(parts: Path) -> set[str]:
    """Remove every row of each video that has an infrastructure-error row (its scorer was unavailable, or its
    worker failed unexpectedly), part by part, atomically; return their ids. ``--resume`` runs them again."""
    dropped: set[str] = set()
    for part in sorted(parts.glob("part-*.parquet")):
        table = pq.read_table(part, schema=schema())
        kinds = table.column("error_kind").to_pylist()
        ids = table.column("video_id").to_pylist()
        infra = {v for v, k in zip(ids, kinds, strict=True) if k == "infra"}
        if infra:
            keep = pa.array([v not in infra for v in ids])
            _write_atomically(table.filter(keep), part)
            dropped |= infra
    return dropped


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


class ResultsError(ValueError):
    """A run folder without a results file, or one that is not a results file of this schema."""


def read_results(path: Path) -> list[ScoreRow]:
    """Every row of a results file; :class:`ResultsError` says what is wrong with one that cannot be read."""
    from pydantic import ValidationError

    if not path.is_file():
        unfinished = (path.parent / "run.json").exists() or any((path.parent / "parts").glob("part-*.parquet"))
        why = "its replay did not finish (run it again with --resume)" if unfinished else "not a run folder"
        raise ResultsError(f"no {path.name} in {path.parent}: {why}")
    try:
        return [ScoreRow.model_validate(r) for r in pq.read_table(path).to_pylist()]
    except (pa.ArrowException, OSError) as exc:
        raise ResultsError(f"{path} is not a readable Parquet file: {exc}") from None
    except ValidationError as exc:
        raise ResultsError(f"{path} holds rows that are not score rows: {exc.errors()[0]['msg']}") from None
