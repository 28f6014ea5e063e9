"""The report's tables as data: one :class:`Table` object per table, rendered to Markdown by
:meth:`Table.to_markdown` and to HTML by the report's template, so the two cannot disagree.

They follow RA-Bench's LastMile table (Table 31): AUC per condition per detector with bootstrap intervals and
the drift from ``original``, operating points at the fixed threshold, per-source AUC, and the Spearman
correlation of the detector ranking between ``original`` and each condition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gateway.evaluation.paired import Evaluation

MEAN_KEYS = ("auc", "fake_recall", "real_recall", "bacc", "tpr_at_5")
RESOLVES = {0.01: 100, 0.05: 20}  # real videos per source needed to resolve T@x% (one false positive = x)


@dataclass(frozen=True)
class Row:
    """One table row; an emphasised row (a mean, a correlation) is a summary of the rows above it."""

    cells: tuple[str, ...]
    emphasis: bool = False


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = ()  # read under the table

    def to_markdown(self) -> str:
        lines = ["| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
        for row in self.rows:
            first = f"**{row.cells[0]}**" if row.emphasis else row.cells[0]
            lines.append("| " + " | ".join((first, *row.cells[1:])) + " |")
        return "\n".join(lines) + "\n" + "".join(f"\n{note}\n" for note in self.notes)


def means(ev: Evaluation) -> dict[str, dict[str, float]]:
    """Per condition, the mean over detectors of AUC, FakeR, RealR, BAcc and T@5%."""
    out = {}
    for cond in ev.conditions:
        cells = [ev.cell(d, cond) for d in ev.detectors]
        out[cond] = {k: float(np.nanmean([getattr(c, k) for c in cells])) for k in MEAN_KEYS}
    return out


def pct(x: float | None) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{100 * x:.1f}"


def interval(ci: tuple[float, float] | None) -> str:
    return "" if ci is None or not np.isfinite(ci[0]) else f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def main_table(ev: Evaluation) -> Table:
    """The headline table: AUC (95 % CI) per detector and condition, with the drift from original."""
    rows = []
    for det in ev.detectors:
        cells = []
        for cond in ev.conditions:
            c = ev.cell(det, cond)
            drift = "" if cond == "original" or c.auc_drift is None else f" ({100 * c.auc_drift:+.1f})"
            cells.append(f"{pct(c.auc)}{interval(c.auc_ci)}{drift}")
        rows.append(Row((det, *cells)))
    m = means(ev)
    rows.append(Row(("mean", *(pct(m[c]["auc"]) for c in ev.conditions)), emphasis=True))
    rho = [ev.rank_correlation.get(c, np.nan) for c in ev.conditions]
    rows.append(Row(("Spearman vs original", *("-" if not np.isfinite(r) else f"{r:.2f}" for r in rho)), True))
    return Table("AUC (%) per condition, 95% CI, (drift from original)", ("detector", *ev.conditions), tuple(rows))


def operating_table(ev: Evaluation) -> Table:
    """FakeR, RealR (with intervals), BAcc, macro-F1, T@1%, T@5%, F@95% and FakeR drift per cell."""
    header = ("detector", "condition", "FakeR", "RealR", "BAcc", "macro-F1", "T@1%", "T@5%", "F@95%")
    rows = tuple(
        Row(
            (
                c.detector,
                c.condition,
                f"{pct(c.fake_recall)}{interval(c.fake_recall_ci)}",
                f"{pct(c.real_recall)}{interval(c.real_recall_ci)}",
                pct(c.bacc),
                pct(c.macro_f1),
                pct(c.tpr_at_1) + ("*" if c.min_real_per_source < RESOLVES[0.01] else ""),
                pct(c.tpr_at_5) + ("*" if c.min_real_per_source < RESOLVES[0.05] else ""),
                pct(c.fpr_at_95),
                "-"
                if c.fake_recall_drift is None
                else f"{100 * c.fake_recall_drift:+.1f}{interval(c.fake_recall_drift_ci)}",
                str(c.failures),
            )
        )
        for c in ev.cells
    )
    notes = ()
    if any(c.min_real_per_source < RESOLVES[0.01] for c in ev.cells):
        fewest = min(c.min_real_per_source for c in ev.cells)
        notes = (
            f"* Not resolved by this sample: T@1% needs at least {RESOLVES[0.01]} real videos per source and T@5% "
            f"{RESOLVES[0.05]} (here as few as {fewest}); with fewer, the ROC's first step already passes the "
            "FPR, so the value is the TPR at FPR = 0.",
        )
    return Table("Operating points at the fixed threshold", (*header, "FakeR drift", "failures"), rows, notes)


def source_table(ev: Evaluation) -> Table:
    """AUC of each generation source against its matched real anchors, per detector and condition."""
    rows = tuple(Row((c.detector, c.condition, *(pct(c.per_source_auc.get(s)) for s in ev.sources))) for c in ev.cells)
    return Table("Per-source AUC (%)", ("detector", "condition", *ev.sources), rows)


def report_tables(ev: Evaluation) -> list[Table]:
    """The report's tables, in the order they appear."""
    return [main_table(ev), operating_table(ev), source_table(ev)]
