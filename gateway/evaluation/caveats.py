"""What a reader must know before trusting the report's numbers: the failure banner (rows that failed, cells
left without a score, grouped by :func:`gateway.batch.failures.summarize`), the small-sample warnings (too few
anchors per source for the bootstrap, zero-width intervals) and the seeds, always stated."""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict

import numpy as np

from gateway.batch.failures import RunFailures, summarize
from gateway.core.messages import ScoreRow
from gateway.core.wording import counted
from gateway.evaluation import proportions
from gateway.evaluation.paired import Evaluation
from gateway.evaluation.tables import interval, pct, points, zero_width
from gateway.evaluation.thresholds import VERDICT

# Anchors per generation source under which the anchor-clustered bootstrap is too rough to lean on: its unit
# is the anchor, and percentile intervals on few clusters run narrow (tests/test_metrics.py already allows
# for slight under-coverage at 40 clusters); 30 is the usual rule of thumb for a bootstrap to settle.
SMALL_SAMPLE_ANCHORS = 30
# zero-width intervals named in the warning (the tables mark them all)
ZERO_WIDTH_EXAMPLES = 3
# a threshold keeping fewer of the real videos real on original is named as unfit
UNFIT_REAL_RECALL = 0.5
# an AUC drift further than this from the difference of the AUCs shown is named
SAME_VIDEOS_TOLERANCE = 1e-9
UNRECORDED_CORPUS_SEED = "not recorded (not a synthesised corpus)"

# interval field -> (its label, the value it brackets); drifts only off original
_INTERVALS = {
    "auc_ci": ("AUC", "auc"),
    "fake_recall_ci": ("FakeR", "fake_recall"),
    "real_recall_ci": ("RealR", "real_recall"),
    "auc_drift_ci": ("AUC drift", "auc_drift"),
    # the FakeR drift's holds Newcombe's interval: never of zero width
}


def failure_banner(rows: list[ScoreRow], conditions: list[str], recalls: str = "FakeR/RealR") -> dict:
    """The banner's content: shown when any row failed, a cell has no score, or there are no rows at all.
    ``conditions`` are the run's own (run.json), so a condition that produced no row is listed too; ``recalls``:
    the recalls whose denominators keep a failed video (a run of real videos only has RealR alone)."""
    detectors = sorted({r.detector for r in rows})
    failures = summarize(rows, expected=itertools.product(detectors, conditions))
    scored = sum(r.score is not None and r.error is None for r in rows)
    return {
        "shown": bool(failures.groups or failures.empty_cells or not failures.rows),
        "headline": _headline(failures, scored, recalls),
        # the bound is the replay's or demo's option, not the report's
        "lines": failures.lines(with_bound=False),
        "groups": [dataclasses.asdict(g) for g in failures.groups],
        "empty_cells": [list(cell) for cell in failures.empty_cells],
        "video_rows": failures.video_rows,
        "infra_rows": failures.infra_rows,
        "rows": failures.rows,
        "scored_rows": scored,
    }


def _headline(failures: RunFailures, scored: int, recalls: str) -> str:
    if not failures.rows:
        return "This run has no result rows: nothing could be evaluated, and every table below is empty."
    counts = (
        f"{counted(failures.video_rows, 'video-error row')} (kept in the {recalls} denominators as misses) and "
        f"{counted(failures.infra_rows, 'infrastructure-error row')} (counted apart, in no metric), of "
        f"{counted(failures.rows, 'row')}"
    )
    if not scored:
        return f"Every row of this run failed: {counts}. No metric could be computed; the tables below are empty."
    empty = len(failures.empty_cells)
    cells = f"; {counted(empty, 'cell has', 'cells have')} no score at all" if empty else ""
    return f"Failures in this run: {counts}{cells}."


def anchors_per_source(rows: list[ScoreRow]) -> dict[str, int]:
    """Real anchors each generation source is paired with (the bootstrap's clusters for that source)."""
    linked: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        if r.label == "generated" and r.source and r.anchor_id:
            linked[r.source].add(r.anchor_id)
    return {s: len(a) for s, a in sorted(linked.items())}


def zero_width_intervals(ev: Evaluation) -> list[dict]:
    """Every interval shown with zero width (every replicate agreed), in table order."""
    out = []
    for c in ev.cells:
        for key, (label, value) in _INTERVALS.items():
            if "drift" in key and c.condition == "original":
                continue
            ci = getattr(c, key)
            if zero_width(ci):
                out.append(
                    {
                        "detector": c.detector,
                        "condition": c.condition,
                        "metric": label,
                        "value": getattr(c, value),
                        "ci": ci,
                    }
                )
    return out


def sample_warnings(ev: Evaluation, rows: list[ScoreRow]) -> list[str]:
    """The small-sample warnings: sources with fewer than SMALL_SAMPLE_ANCHORS anchors, zero-width intervals."""
    out = small_sample_warnings(rows)
    # all failed: the banner
    zero = zero_width_intervals(ev) if any(r.score is not None for r in rows) else []
    if zero:
        examples = "; ".join(
            f"{z['detector']} under {z['condition']}: {z['metric']} {_signed(z)}{interval(z['ci'])}"
            for z in zero[:ZERO_WIDTH_EXAMPLES]
        )
        out.append(
            f"{counted(len(zero), 'interval has', 'intervals have')} zero width (marked †), e.g. {examples}. "
            "Every bootstrap replicate gave "
            "the same value, typically because a class was separated perfectly, or missed entirely, on few "
            "anchors: it shows no variation in this sample, not certainty."
        )
    out += same_video_warnings(ev)
    return fit_warnings(ev, rows) + out


def small_sample_warnings(rows: list[ScoreRow]) -> list[str]:
    """The warning that generation sources of ``rows`` have fewer than SMALL_SAMPLE_ANCHORS anchors (none if
    every source has enough)."""
    per_source = anchors_per_source(rows)
    few = {s: n for s, n in per_source.items() if n < SMALL_SAMPLE_ANCHORS}
    if not few:
        return []
    listed = ", ".join(f"{s} {n}" for s, n in few.items())
    return [
        f"Small sample: {len(few)} of {counted(len(per_source), 'generation source')} "
        f"{'has' if len(few) == 1 else 'have'} fewer than "
        f"{SMALL_SAMPLE_ANCHORS} real anchors ({listed}). The bootstrap resamples anchors, so with this few "
        "its intervals are rough and tend to be too narrow: treat differences of a few points as noise."
    ]


def fit_warnings(ev: Evaluation, rows: list[ScoreRow]) -> list[str]:
    """Detectors that do not work on this corpus as scored: AUC on original wholly below chance (scores pointing
    the other way), or a threshold that calls most of the real videos it scored on original generated (failed
    videos, misses in RealR, are not the threshold's doing)."""
    if "original" not in ev.conditions:
        return []
    out = []
    for det in ev.detectors:
        c = ev.cell(det, "original")
        if np.isfinite(c.auc_ci[1]) and c.auc_ci[1] < 0.5:
            out.append(
                f"{det} ranks real videos above generated ones on original (AUC {pct(c.auc)}{interval(c.auc_ci)}, "
                "wholly below chance): on this corpus its scores point the other way, so its drifts and findings "
                "describe a detector that does not work here. The reference detectors were trained on the "
                "self-made corpus's synthetic anchors; on other footage (your own videos as anchors, for one) they "
                "can separate that footage from the generated videos by what differs between them instead."
            )
        if ev.calibrated is None:
            out += unfit_threshold_warnings(rows, det, c.threshold)
    return out


def unfit_threshold_warnings(rows: list[ScoreRow], det: str, threshold: float, name: str | None = None) -> list[str]:
    """The warning that a card's ``threshold`` keeps under UNFIT_REAL_RECALL of ``det``'s scored real videos real on
    original (none if it keeps more, or none was scored); ``name``: how the warning calls ``det``."""
    # a verdict has no threshold
    kept = scored_real_recall(rows, det, threshold) if threshold != VERDICT else None
    if kept is None or kept >= UNFIT_REAL_RECALL:
        return []
    return [
        f"{name or det}'s threshold ({threshold:.4g}) keeps only {pct(kept)} % of the scored real videos real on "
        "original: it does not fit this corpus (a card's threshold is set for RealR 95 % on its own calibration "
        "set), and its FakeR and RealR say little. `lastmile report RUN --calibrate 0.95` recalibrates the "
        "thresholds on this run's original reals; `lastmile detectors calibrate RUN --real-recall 0.95` writes them "
        "into the cards, for the tap and the replay."
    ]


def scored_real_recall(rows: list[ScoreRow], det: str, threshold: float) -> float | None:
    """The share of ``det``'s scored real videos on original (those its RealR counts) kept real at ``threshold``;
    None without one."""
    decided = proportions.decisions([r for r in rows if r.detector == det], {det: threshold})
    reals = [d for d in decided.get((det, "original"), {}).values() if d.label == "real" and d.flagged is not None]
    return sum(not d.flagged for d in reals) / len(reals) if reals else None


def same_video_warnings(ev: Evaluation) -> list[str]:
    """Where an AUC drift, on the videos scored under both conditions, is not the difference of the two AUCs shown
    (each keeps the videos scored under it): a video failed under one of the two."""
    base = {c.detector: c for c in ev.cells if c.condition == "original"}
    apart = [
        f"{c.detector} under {c.condition}"
        for c in ev.cells
        if c.condition != "original"
        and c.detector in base
        and c.auc_drift is not None
        and np.isfinite(c.auc_drift)
        and np.isfinite(c.auc - base[c.detector].auc)
        and abs(c.auc_drift - (c.auc - base[c.detector].auc)) > SAME_VIDEOS_TOLERANCE
    ]
    if not apart:
        return []
    return [
        f"AUC drift is on the videos scored under both conditions: in {counted(len(apart), 'cell')} (e.g. "
        f"{'; '.join(apart[:ZERO_WIDTH_EXAMPLES])}) a video failed under one of them, so the drift is not the "
        "difference of the two AUCs shown, each of which keeps the videos scored under it."
    ]


def _signed(z: dict) -> str:
    return points(z["value"]) if "drift" in z["metric"] else pct(z["value"])


def seeds(ev: Evaluation, corpus: dict) -> dict:
    """The bootstrap seed (always known) and the corpus seed, or why there is none."""
    seed = (corpus.get("config") or {}).get("seed")
    if seed is not None:
        text = str(seed)
    elif corpus.get("described"):
        # the proxy's rows, without its corpus.json
        text = f"not recorded ({corpus['described']})"
    else:
        text = UNRECORDED_CORPUS_SEED
    return {"bootstrap": ev.seed, "corpus": seed, "corpus_text": text}
