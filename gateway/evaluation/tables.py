"""The report's tables as data: one :class:`Table` object per table, rendered to Markdown by
:meth:`Table.to_markdown` and to HTML by the report's template, so the two cannot disagree.

They follow RA-Bench's LastMile table (Table 31): AUC per condition per detector with bootstrap intervals and
the drift from ``original``, operating points at the fixed threshold, per-source AUC, and the Spearman
correlation of the detector ranking between ``original`` and each condition.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from gateway.evaluation.cells import CellMetrics
from gateway.evaluation.paired import Evaluation

MEAN_KEYS = ("auc", "fake_recall", "real_recall", "bacc", "tpr_at_5")
# real videos per source needed to resolve T@x% (one false positive = x)
RESOLVES = {0.01: 100, 0.05: 20}
# marks an interval every bootstrap replicate agreed on (the glossary and the warnings say why)
ZERO_WIDTH = "†"


@dataclass(frozen=True)
class TableRow:
    """One table row; an emphasised row (a mean, a correlation) is a summary of the rows above it."""

    cells: tuple[str, ...]
    emphasis: bool = False


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[TableRow, ...]
    # read under the table
    notes: tuple[str, ...] = ()
    # read before it, as the report's own cautions are
    cautions: tuple[str, ...] = ()

    def to_markdown(self) -> str:
        lines = [f"> **Caution:** {c}\n" for c in self.cautions]
        lines += ["| " + " | ".join(map(md_cell, self.header)) + " |", "|" + "---|" * len(self.header)]
        for row in self.rows:
            cells = [md_cell(c) for c in row.cells]
            first = f"**{cells[0]}**" if row.emphasis else cells[0]
            lines.append("| " + " | ".join((first, *cells[1:])) + " |")
        return "\n".join(lines) + "\n" + "".join(f"\n{note}\n" for note in self.notes)


def md_cell(text: str) -> str:
    """A table cell as Markdown shows it: a ``|`` in a name (a detector's version is free text) ends no cell."""
    return text.replace("|", "\\|")


def md_alt(text: str) -> str:
    """An image's alt text as Markdown shows it: a bracket in a caption's name ends no ``![...]``."""
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def means(ev: Evaluation) -> dict[str, dict[str, float]]:
    """Per condition, the mean over detectors of AUC, FakeR, RealR, BAcc and T@5%."""
    out = {}
    with warnings.catch_warnings():
        # a condition where no detector has a value: nan, shown as "-"
        warnings.simplefilter("ignore", RuntimeWarning)
        for cond in ev.conditions:
            cells = [ev.cell(d, cond) for d in ev.detectors]
            out[cond] = {k: float(np.nanmean([getattr(c, k) for c in cells] or [np.nan])) for k in MEAN_KEYS}
    return out


def pct(x: float | None) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{100 * x:.1f}"


def points(x: float) -> str:
    """A difference in signed percentage points, one decimal; one that rounds to zero is +0.0, never -0.0; an
    undefined one is -."""
    return f"{round(100 * x, 1) + 0.0:+.1f}" if np.isfinite(x) else "-"


def defined(x: float | None) -> bool:
    """A value to show: neither missing nor nan (a drift of exactly 0 is a value)."""
    return x is not None and bool(np.isfinite(x))


def zero_width(ci: tuple[float, float] | None) -> bool:
    """An interval every bootstrap replicate agreed on: no variation in this sample, not certainty."""
    return ci is not None and bool(np.isfinite(ci[0])) and ci[0] == ci[1]


def interval(ci: tuple[float, float] | None) -> str:
    if ci is None or not np.isfinite(ci[0]):
        return ""
    return f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" + (ZERO_WIDTH if zero_width(ci) else "")


def auc_text(c: CellMetrics) -> str:
    """A cell's AUC with its interval and drift; ``no score`` for a detector that decided without scores (a chat
    detector's verdicts: an AUC is never made of decisions)."""
    if c.no_score:
        return "no score"
    drift = "" if c.condition == "original" or not defined(c.auc_drift) else f" ({points(c.auc_drift)})"
    return f"{pct(c.auc)}{interval(c.auc_ci)}{drift}"


def main_table(ev: Evaluation) -> Table:
    """The headline table: AUC (95 % CI) per detector and condition, with the drift from original."""
    rows = []
    for det in ev.detectors:
        cells = []
        for cond in ev.conditions:
            cells.append(auc_text(ev.cell(det, cond)))
        rows.append(TableRow((det, *cells)))
    m = means(ev)
    rows.append(TableRow(("mean", *(pct(m[c]["auc"]) for c in ev.conditions)), emphasis=True))
    rho = [ev.rank_correlation.get(c, np.nan) for c in ev.conditions]
    rows.append(TableRow(("Spearman vs original", *("-" if not np.isfinite(r) else f"{r:.2f}" for r in rho)), True))
    title = "AUC (%) per condition, 95% CI, (drift from original)"
    return Table(title, ("detector", *ev.conditions), tuple(rows), _zero_width_note(rows))


def operating_table(ev: Evaluation) -> Table:
    """FakeR, RealR (with intervals), BAcc, macro-F1, T@1%, T@5%, F@95% and FakeR drift per cell."""
    header = ("detector", "condition", "FakeR", "RealR", "BAcc", "macro-F1", "T@1%", "T@5%", "F@95%")

    def star(x: float, fpr: float, c: CellMetrics) -> str:
        # T@x% that this sample cannot resolve
        return pct(x) + ("*" if np.isfinite(x) and c.min_real_per_source < RESOLVES[fpr] else "")

    def drift(c: CellMetrics) -> str:
        if c.condition == "original" or not defined(c.fake_recall_drift):
            return "-"
        return f"{points(c.fake_recall_drift)}{interval(c.fake_recall_drift_ci)}"

    rows = tuple(
        TableRow(
            (
                c.detector,
                c.condition,
                f"{pct(c.fake_recall)}{interval(c.fake_recall_ci)}",
                f"{pct(c.real_recall)}{interval(c.real_recall_ci)}",
                pct(c.bacc),
                # no video
                pct(c.macro_f1 if np.isfinite(c.fake_recall) or np.isfinite(c.real_recall) else np.nan),
                star(c.tpr_at_1, 0.01, c),
                star(c.tpr_at_5, 0.05, c),
                pct(c.fpr_at_95),
                drift(c),
                str(c.failures),
            )
        )
        for c in ev.cells
    )
    notes = _zero_width_note(rows)
    shown = [c for c in ev.cells if np.isfinite(c.tpr_at_1)]
    if any(c.min_real_per_source < RESOLVES[0.01] for c in shown):
        fewest = min(c.min_real_per_source for c in shown)
        notes += (
            f"* Not resolved by this sample: T@1% needs at least {RESOLVES[0.01]} real videos per source and T@5% "
            f"{RESOLVES[0.05]} (here as few as {fewest}); with fewer, the ROC's first step already passes the "
            "FPR, so the value is the TPR at FPR = 0.",
        )
    return Table("Operating points at the fixed threshold", (*header, "FakeR drift", "failures"), rows, notes)


def _zero_width_note(rows: list[TableRow] | tuple[TableRow, ...]) -> tuple[str, ...]:
    if not any(ZERO_WIDTH in cell for row in rows for cell in row.cells):
        return ()
    return (
        f"{ZERO_WIDTH} Zero-width interval: every bootstrap replicate gave the same value, which shows no variation "
        "in this sample (typically a class separated perfectly, or missed entirely, on few anchors), not certainty.",
    )


def source_table(ev: Evaluation) -> Table:
    """AUC of each generation source against its matched real anchors, per detector and condition."""
    rows = tuple(
        TableRow((c.detector, c.condition, *(pct(c.per_source_auc.get(s)) for s in ev.sources))) for c in ev.cells
    )
    return Table("Per-source AUC (%)", ("detector", "condition", *ev.sources), rows)


def chat_table(ev: Evaluation) -> Table:
    """Chat detectors as RA-Bench reports multimodal models: class-conditional recall, verdict macro-F1 and the
    rating AUC (``no score`` where the replies give none), with intervals and drift; the replies that said no
    verdict, and the tokens paid for."""
    header = ("detector", "condition", "FakeR", "RealR", "macro-F1", "rating AUC", "unparsed", "tokens in / out")
    rows = []
    for chat in ev.chat:
        c = ev.cell(chat.detector, chat.condition)
        cached = f" ({chat.cached} cached)" if chat.cached else ""
        rows.append(
            TableRow(
                (
                    c.detector,
                    c.condition,
                    f"{pct(c.fake_recall)}{interval(c.fake_recall_ci)}",
                    f"{pct(c.real_recall)}{interval(c.real_recall_ci)}",
                    f"{pct(c.macro_f1)}{interval(c.macro_f1_ci)}",
                    auc_text(c),
                    f"{chat.unparsed} of {chat.replies}",
                    f"{chat.tokens_in:,} / {chat.tokens_out:,}{cached}",
                )
            )
        )
    notes = (
        "Unparsed: replies that said no verdict (a refusal, prose without one, a rating out of range); each is a "
        "miss of its class in FakeR, RealR and macro-F1, and outside every AUC. Tokens: the replies' usage, those "
        "read from the cache not counted again.",
    )
    return Table("Chat detectors (multimodal LLMs), 95% CI", header, tuple(rows), notes + _zero_width_note(rows))


def aspect_table(ev: Evaluation) -> Table:
    """Each diagnostic aspect's AUC with its interval and drift, and the collapse rate (every aspect one value)."""
    names = list(dict.fromkeys(name for chat in ev.chat for name in chat.aspects))
    rows = []
    for chat in ev.chat:
        if not chat.aspects:
            continue
        cells = []
        for name in names:
            a = chat.aspects.get(name)
            drift = "" if a is None or not defined(a.drift) else f" ({points(a.drift)})"
            cells.append("-" if a is None else f"{pct(a.auc)}{interval(a.auc_ci)}{drift}")
        collapse = f"{pct(chat.collapse)}{interval(chat.collapse_ci)} ({chat.collapsed} of {chat.diagnosed})"
        rows.append(TableRow((chat.detector, chat.condition, *cells, collapse)))
    notes = (
        "Collapse: the share of parsed diagnostic replies that give every aspect the same value (RA-Bench's "
        "exact-five collapse), Wilson 95% interval; a collapsed reply carries one number, not five.",
    )
    title = "Diagnostic aspects: AUC (%) per aspect, 95% CI (drift from original), and collapse"
    return Table(title, ("detector", "condition", *names, "collapse"), tuple(rows), notes + _zero_width_note(rows))


def report_tables(ev: Evaluation) -> list[Table]:
    """The report's tables, in the order they appear (the chat detectors' where the run has any)."""
    chat = [chat_table(ev)] if ev.chat else []
    aspects = [aspect_table(ev)] if any(c.aspects for c in ev.chat) else []
    return [main_table(ev), operating_table(ev), source_table(ev), *chat, *aspects]
