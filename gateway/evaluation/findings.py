"""The report's key findings: a few sentences generated from the evaluation's numbers, so a reader sees at a
glance what the tables say: the largest AUC drops from ``original`` (with their paired intervals, and whether
each excludes 0), significant gains, the largest FakeR drop at the fixed threshold, the breaking points of
sweeps, and how the detector ranking moved. Nothing is written about a detector that the numbers do not
say; a finding whose numbers are undefined (NaN) is left out."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gateway.evaluation.cells import CellMetrics
from gateway.evaluation.paired import Evaluation
from gateway.evaluation.reals import RealsEvaluation
from gateway.evaluation.sweeps import breaking_points, sweeps_of
from gateway.evaluation.tables import defined, means, pct, points

# detectors named in the AUC-drop finding (each with its worst condition)
TOP_DROPS = 3
# conditions listed in the ranking finding (the lowest correlations first)
LIST_RANKS = 6


@dataclass(frozen=True)
class Finding:
    # auc_drop, auc_gain, mean_auc, fake_recall_drop, breaking_points, ranking; real_recall_drop
    kind: str
    text: str
    data: dict = field(default_factory=dict)


def _finite(*xs: float | None) -> bool:
    return all(defined(x) for x in xs)


def _ci_ok(ci: tuple[float, float] | None) -> bool:
    return ci is not None and _finite(*ci)


def _points(x: float) -> str:
    return points(x)


def _ci(ci: tuple[float, float]) -> str:
    return f"[{points(ci[0])}, {points(ci[1])}]"


def excludes_zero(ci: tuple[float, float]) -> bool:
    return ci[0] > 0 or ci[1] < 0


def _verdict(ci: tuple[float, float]) -> str:
    return "excludes 0" if excludes_zero(ci) else "includes 0, so not distinguishable from resampling noise"


def _drift_cells(ev: Evaluation | RealsEvaluation, metric: str) -> list[CellMetrics]:
    """The cells off original whose ``metric`` drift and its interval are defined (none where the run has no
    original: no drift is measured)."""
    return [
        c
        for c in ev.cells
        if c.condition != "original"
        and _finite(getattr(c, f"{metric}_drift"))
        and _ci_ok(getattr(c, f"{metric}_drift_ci"))
    ]


def _largest(of: int) -> str:
    """What a finding that names the TOP_DROPS largest of ``of`` drops says of those it leaves out."""
    return f" ({TOP_DROPS} largest of {of} detectors' drops)" if of > TOP_DROPS else ""


def _worst_per_detector(cells: list[CellMetrics], key: str, sign: int = 1) -> list[CellMetrics]:
    """Per detector, its cell with the lowest (``sign`` 1) or highest (-1) ``key``; sorted the same way."""
    best: dict[str, CellMetrics] = {}
    for c in cells:
        if c.detector not in best or sign * getattr(c, key) < sign * getattr(best[c.detector], key):
            best[c.detector] = c
    return sorted(best.values(), key=lambda c: sign * getattr(c, key))


def _cell_change(ev: Evaluation | RealsEvaluation, c: CellMetrics, metric: str) -> str:
    base = getattr(ev.cell(c.detector, "original"), metric)
    ci = getattr(c, f"{metric}_drift_ci")
    return (
        f"{c.detector} under {c.condition}, {pct(base)} -> {pct(getattr(c, metric))} "
        f"({_points(getattr(c, f'{metric}_drift'))} points, paired 95% interval {_ci(ci)}, {_verdict(ci)})"
    )


def _cell_data(c: CellMetrics, metric: str) -> dict:
    ci = getattr(c, f"{metric}_drift_ci")
    return {
        "detector": c.detector,
        "condition": c.condition,
        metric: getattr(c, metric),
        "drift": getattr(c, f"{metric}_drift"),
        "drift_ci": ci,
        "excludes_zero": excludes_zero(ci),
    }


def _auc_drops(ev: Evaluation) -> list[Finding]:
    cells = _drift_cells(ev, "auc")
    every = [c for c in _worst_per_detector(cells, "auc_drift") if c.auc_drift < 0]
    drops = every[:TOP_DROPS]
    gains = [c for c in _worst_per_detector(cells, "auc_drift", -1) if c.auc_drift_ci[0] > 0]
    out = []
    if drops:
        named = "; ".join(_cell_change(ev, c, "auc") for c in drops)
        text = f"Largest AUC drops from original{_largest(len(every))}: {named}."
        out.append(Finding("auc_drop", text, {"cells": [_cell_data(c, "auc") for c in drops]}))
    elif cells:
        out.append(Finding("auc_drop", "No detector's AUC fell below its value on original under any condition."))
    if gains:
        text = "AUC rose beyond resampling noise for " + "; ".join(_cell_change(ev, c, "auc") for c in gains) + "."
        out.append(Finding("auc_gain", text, {"cells": [_cell_data(c, "auc") for c in gains]}))
    return out


def _mean_auc(ev: Evaluation) -> list[Finding]:
    m = {c: v["auc"] for c, v in means(ev).items() if _finite(v["auc"])}
    if "original" not in m or len(m) < 2 or len(ev.detectors) < 2:
        return []
    worst = min((c for c in m if c != "original"), key=lambda c: m[c])
    text = (
        f"Mean AUC over the {len(ev.detectors)} detectors: {pct(m['original'])} on original, lowest under "
        f"{worst} ({pct(m[worst])}, {_points(m[worst] - m['original'])} points)."
    )
    return [Finding("mean_auc", text, {"original": m["original"], "condition": worst, "auc": m[worst]})]


def _fake_recall_drop(ev: Evaluation) -> list[Finding]:
    cells = [c for c in _drift_cells(ev, "fake_recall") if c.fake_recall_drift < 0]
    if not cells:
        return []
    c = min(cells, key=lambda c: c.fake_recall_drift)
    text = "Largest FakeR drop at the threshold fixed on original: " + _cell_change(ev, c, "fake_recall")
    if _finite(c.real_recall_drift) and c.real_recall_drift >= 0:
        text += f", while its RealR moved {_points(c.real_recall_drift)} points: its decisions shifted toward Real"
    return [Finding("fake_recall_drop", text + ".", _cell_data(c, "fake_recall"))]


def _value(v: float) -> str:
    return f"{v:g}"


def _breaking_points(ev: Evaluation) -> list[Finding]:
    if "original" not in ev.conditions:
        return []
    out = []
    for curve in sweeps_of(ev.conditions):
        breaks = breaking_points(ev, curve)
        auc = [f"{b.detector} at {_value(b.auc_drift_below)}" for b in breaks if b.auc_drift_below is not None]
        fr = [f"{b.detector} at {_value(b.fake_recall_halved)}" for b in breaks if b.fake_recall_halved is not None]
        steady = [b.detector for b in breaks if b.auc_drift_below is None and b.fake_recall_halved is None]
        text = (
            f"Sweep {curve.name} (values {', '.join(_value(v) for v in curve.values)}, mildest first): "
            + (f"AUC breaks for {', '.join(auc)}" if auc else "no detector's AUC breaks within the values tried")
            + (f"; FakeR halves for {', '.join(fr)}" if fr else "; no detector's FakeR halves")
            + (f"; {', '.join(steady)} did not break within them." if steady and len(steady) < len(breaks) else ".")
        )
        out.append(
            Finding("breaking_points", text, {"sweep": curve.name, "breaking_points": [b.__dict__ for b in breaks]})
        )
    return out


def _ranking(ev: Evaluation) -> list[Finding]:
    rho = {c: r for c, r in ev.rank_correlation.items() if c != "original" and _finite(r)}
    if not rho:
        return []
    if all(np.isclose(r, 1.0) for r in rho.values()):
        text = "The detector ranking by AUC is the same as on original under every condition (Spearman 1.00)"
    else:
        order = sorted(rho, key=lambda c: rho[c])
        shown = ", ".join(f"{c} {rho[c]:.2f}" for c in order[:LIST_RANKS])
        more = f" (lowest {LIST_RANKS} of {len(order)})" if len(order) > LIST_RANKS else ""
        text = f"Spearman correlation of the detector ranking by AUC vs original{more}: {shown}"
    if len(ev.detectors) == 2:
        text += "; with two detectors it can only be +1 or -1"
    return [Finding("ranking", text + ".", {"spearman": rho})]


def real_recall_drops(ev: Evaluation | RealsEvaluation) -> list[Finding]:
    """The finding of a run of real videos only (:mod:`gateway.evaluation.reals`): per detector, its largest RealR
    drop from original (more of its real videos decided generated), the largest first, and the detectors whose
    RealR fell under no condition."""
    cells = _drift_cells(ev, "real_recall")
    every = [c for c in _worst_per_detector(cells, "real_recall_drift") if c.real_recall_drift < 0]
    steady = sorted({c.detector for c in cells} - {c.detector for c in every})
    if not every:
        text = "No detector's RealR fell below its value on original under any condition."
        return [Finding("real_recall_drop", text)] if cells else []
    drops = every[:TOP_DROPS]
    text = (
        f"Largest RealR drops from original (real videos decided generated once disseminated)"
        f"{_largest(len(every))}: " + "; ".join(_cell_change(ev, c, "real_recall") for c in drops) + "."
    )
    if steady:
        text += (
            f" The RealR point estimate fell under no condition for {', '.join(steady)} (a point, not a bound: the "
            "table gives each drift's interval)."
        )
    data = {"cells": [_cell_data(c, "real_recall") for c in drops], "steady": steady}
    return [Finding("real_recall_drop", text, data)]


def key_findings(ev: Evaluation) -> list[Finding]:
    """The findings, most important first; empty when nothing is defined (e.g. every row failed)."""
    return _auc_drops(ev) + _mean_auc(ev) + _fake_recall_drop(ev) + _breaking_points(ev) + _ranking(ev)
