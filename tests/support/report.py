"""Score rows and runs for the report's tests (shared by `tests/test_compare.py`, `tests/test_report_glance.py`,
`tests/test_metrics.py`, `tests/test_corpus.py` and `tests/test_reals_report.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gateway.batch.results import merge, write_part
from gateway.core.messages import ScoreRow

CONDITIONS = ("original", "spatial", "full")
SOURCES = ("genA", "genB")
DETECTORS = ("alpha", "beta")


def _rows(anchors: int, seed: int = 0, collapse: str | None = "beta", versions: dict | None = None) -> list[ScoreRow]:
    """Per anchor one real video and one generated counterpart, scored by alpha and beta under every condition;
    generated videos score 2 higher, except for ``collapse`` under full, where the shift is 0.5."""
    rng = np.random.default_rng(seed)
    versions = versions or {"alpha": ("alpha", "1"), "beta": ("beta", "1")}
    out = []
    for i in range(anchors):
        a = f"a{i:03d}"
        base = {"real": rng.normal(), "generated": rng.normal()}  # shared by both detectors: correlated scores
        for key, (det, version) in versions.items():
            for cond in CONDITIONS:
                shift = 0.5 if key == collapse and cond == "full" else 2.0
                common = dict(condition=cond, detector=det, detector_version=version, runtime="sim", anchor_id=a,
                              threshold=1.0)  # fmt: skip
                noise = rng.normal(scale=0.6, size=2)
                out.append(ScoreRow(video_id=a, label="real", source="real", score=base["real"] + noise[0], **common))
                out.append(ScoreRow(video_id=f"{a}_g", label="generated", source="genA",
                                    score=shift + base["generated"] + noise[1], **common))  # fmt: skip
    return out


def _run(folder: Path, rows: list[ScoreRow], conditions: list[str] = CONDITIONS, corpus: dict | None = None) -> Path:
    (folder / "parts").mkdir(parents=True)
    if rows:
        write_part(folder / "parts", 0, len(rows), [r.model_dump() for r in rows])
    merge(folder)
    info = {"conditions": conditions, "config": {"manifest": "user.jsonl"}, "corpus": corpus}
    (folder / "run.json").write_text(json.dumps(info))
    return folder


def _fail(row: ScoreRow, kind: str, cls: str, message: str) -> ScoreRow:
    return row.model_copy(update={"score": None, "error": message, "error_kind": kind, "error_class": cls})


def _failed(rows: list[ScoreRow], where: set[tuple[str, str]]) -> list[ScoreRow]:
    """``rows`` with the (video, condition) pairs of ``where`` failed (a video error)."""
    bad = {"score": None, "error": "bad", "error_kind": "video", "error_class": "X"}
    return [r.model_copy(update=bad) if (r.video_id, r.condition) in where else r for r in rows]


def paired_rows(anchors: int, collapse: str | None = None, under: str = "full", seed: int = 0, sep: float = 2.0,
                conditions: tuple[str, ...] | list[str] = CONDITIONS,
                perfect: str | None = None) -> list[ScoreRow]:  # fmt: skip
    """Each anchor: one real video and one counterpart per source, scored by every detector under every
    condition; generated videos score ``sep`` higher, except for ``collapse`` under ``under`` (and any harsher
    sweep value), where they look real. ``perfect`` separates its classes completely."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(anchors):
        a = f"a{i:03d}"
        for det in DETECTORS:
            for cond in conditions:
                common = dict(condition=cond, detector=det, detector_version="1", runtime="sim", anchor_id=a,
                              threshold=0.5 * sep, spec_hash=f"h-{cond}")  # fmt: skip
                shift = 10.0 if det == perfect else sep
                if det == collapse and (cond == under or (under in cond and cond.endswith("=0.25"))):
                    shift = 0.0
                out.append(ScoreRow(video_id=a, label="real", source="real", score=float(rng.normal()), **common))
                for s in SOURCES:
                    score = float(shift + rng.normal())
                    out.append(ScoreRow(video_id=f"{a}_{s}", label="generated", source=s, score=score, **common))
    return out
