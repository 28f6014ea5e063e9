"""``lastmile report`` of a run of real videos only (:mod:`gateway.evaluation.reals`): report.md, report.json and a
self-contained report.html with one table (RealR per detector and condition, its drift from original and the
flips to generated), the finding and cautions it supports, and one plot. A platform replaying its own footage
learns how many more of its real uploads each detector flags once they are disseminated, net and as flips; the
AUC and FakeR of the full report need generated videos (``lastmile corpus synth --real-dir`` builds proxy
counterparts of them)."""

from __future__ import annotations

from pathlib import Path

from detectors.proxy.corpus import USER_ANCHORS
from gateway.core.messages import ScoreRow
from gateway.core.wording import counted
from gateway.evaluation import jsonout
from gateway.evaluation.caveats import SMALL_SAMPLE_ANCHORS, UNFIT_REAL_RECALL
from gateway.evaluation.compare_report import clear_comparisons
from gateway.evaluation.findings import real_recall_drops
from gateway.evaluation.flips_report import ARROWS, KINDS, FlipSection
from gateway.evaluation.glossary import Term
from gateway.evaluation.plots import Figure, recall_figure, write
from gateway.evaluation.provenance import corpus_notice, report_json, run_context
from gateway.evaluation.reals import (
    RealsCell,
    RealsComparison,
    RealsEvaluation,
    reals_comparison_table,
    reals_comparisons_json,
)
from gateway.evaluation.rendering import environment
from gateway.evaluation.tables import Table, TableRow, defined, interval, pct, points
from gateway.evaluation.thresholds import UNDECIDED

REALS_ONLY = (
    "This run holds real videos only: it measures RealR, the share of real videos each detector keeps real at its "
    "fixed threshold, under each condition, its drift from original (the net change in the share of real uploads "
    "a detector flags once they are disseminated) and the flips to generated (the share of those kept real on "
    "original that it flags under the condition). AUC and FakeR need generated videos: `lastmile corpus synth "
    "--real-dir` builds proxy counterparts of your own videos."
)
INTERVAL = (
    "95% anchor-clustered percentile bootstrap (videos sharing an anchor_id resampled together), widened to hold "
    "Wilson's score interval (RealR) or Newcombe's paired score interval (its drift)"
)
SYNTHETIC_REALS = (
    "This run's real videos are the proxy corpus's synthetic camera-like scenes, not camera footage: their RealR "
    "shows how detectors respond to dissemination on those scenes, not on your uploads."
)
USER_REALS = (
    "This run's real videos are your own, as `lastmile corpus synth --real-dir` re-encoded them (scaled, "
    "centre-cropped, resampled): real footage, no proxy, but not byte for byte your uploads."
)
CAPTION = (
    "RealR (%) at each detector's fixed threshold under each condition, one marker per detector with its 95% "
    "interval (markers offset sideways to stay apart): where a detector's RealR falls, it flags more real videos."
)


def build_reals_report(
    run_dir: Path,
    rows: list[ScoreRow],
    info: dict,
    ev: RealsEvaluation,
    comparisons: list[RealsComparison] = (),
    flipped: tuple[list[FlipSection], str | None] = ([], None),
) -> dict[str, Path]:
    """Write ``run_dir``'s report of ``ev``, the evaluation of its ``rows`` (every one of a real video), with a
    section per champion vs challenger of ``comparisons`` (and comparison.md/.json beside it), and the flipped
    videos' section (:func:`~gateway.evaluation.flips_report.flip_sections`)."""
    ctx = _context(ev, rows, info)
    # a run without a single score has nothing to plot: its banner says so
    figures = []
    if ctx["failures"]["scored_rows"]:
        (run_dir / "plots").mkdir(exist_ok=True)
        path = write(recall_figure(ev, ("real_recall",)), run_dir / "plots" / "real_recall.png")
        figures.append(Figure("real_recall", path, CAPTION))
    table, terms, notice = reals_table(ev), glossary(ev), reals_notice(ctx)
    contests = [reals_comparison_table(c) for c in comparisons]
    out = {"json": run_dir / "report.json", "md": run_dir / "report.md", "html": run_dir / "report.html"}
    report = _as_json(ev, ctx, terms) | {"comparisons": reals_comparisons_json(comparisons, notice)}
    report["flips"] = [s.as_json() for s in flipped[0]]
    out["json"].write_text(jsonout.dumps(report))
    shown = {"ev": ev, "ctx": ctx, "table": table, "figures": figures, "glossary": terms, "comparisons": contests}
    shown |= {"notice": notice, "generators": {}, "reals_only": REALS_ONLY}
    shown |= {"flips": flipped[0], "flips_why": flipped[1], "arrows": ARROWS, "kinds": KINDS}
    env = environment()
    for key, template in (("md", "reals.md.j2"), ("html", "reals.html.j2")):
        out[key].write_text(env.get_template(template).render(**shown))
    clear_comparisons(run_dir)
    if comparisons:
        out |= _write_comparisons(comparisons, contests, run_dir, notice)
    return out


def _write_comparisons(comparisons: list[RealsComparison], tables: list[Table], folder: Path, notice: str | None):
    """``comparison.md`` and ``comparison.json`` in ``folder``, as a run with generated videos has them."""
    parts = ["# Champion vs challenger: real videos only\n", *([f"\n> **{notice}**\n"] if notice else [])]
    parts += [f"\n## {t.title}\n\n{t.to_markdown()}" for t in tables]
    out = {"comparison_md": folder / "comparison.md", "comparison_json": folder / "comparison.json"}
    out["comparison_md"].write_text("".join(parts))
    out["comparison_json"].write_text(jsonout.dumps(reals_comparisons_json(comparisons, notice)))
    return out


def reals_notice(ctx: dict) -> str | None:
    """What the report says of its real videos where they come from the proxy corpus (its corpus notice speaks of
    generated videos, which this run has none of); None for other footage."""
    if corpus_notice(ctx) is None:
        return None
    return USER_REALS if ctx["corpus"].get("real_anchors") == USER_ANCHORS else SYNTHETIC_REALS


def reals_table(ev: RealsEvaluation) -> Table:
    """RealR with its interval, its drift from original with a paired one, and the videos behind each cell."""

    def drift(c: RealsCell) -> str:
        if not defined(c.real_recall_drift):
            return "-"
        return f"{points(c.real_recall_drift)}{interval(c.real_recall_drift_ci)}"

    def flips(c: RealsCell) -> str:
        if not defined(c.flips_to_generated):
            return "-"
        return f"{pct(c.flips_to_generated)}{interval(c.flips_to_generated_ci)}"

    def row(c: RealsCell) -> TableRow:
        recall = f"{pct(c.real_recall)}{interval(c.real_recall_ci)}"
        counts = (str(c.n_real), str(c.failures), str(c.infra_errors))
        return TableRow((c.detector, c.condition, recall, drift(c), flips(c), *counts))

    rows = tuple(row(c) for c in ev.cells)
    header = (
        "detector",
        "condition",
        "RealR",
        "RealR drift",
        "flips to generated",
        "real videos",
        "failures",
        "infra errors",
    )
    title = "RealR (%) at the fixed threshold, 95% CI, its drift from original and the flips to generated"
    return Table(title, header, rows)


def cautions(ev: RealsEvaluation) -> list[str]:
    """What a reader must know before trusting the table: too few anchors, no original to drift from, a card's
    threshold that does not fit this footage, thresholds fit on the very videos they then measure."""
    out = []
    if ev.anchors < SMALL_SAMPLE_ANCHORS:
        fewest = min((c.n_real for c in ev.cells if c.n_real), default=0)
        step = f" (one video moves RealR by {pct(1 / fewest)} points in a cell of {fewest})" if fewest else ""
        out.append(
            f"Small sample: {counted(ev.anchors, 'real anchor')}, fewer than {SMALL_SAMPLE_ANCHORS}{step}. The "
            "intervals are wide and a drift must be large to exclude 0: read the intervals, not the points."
        )
    if "original" not in ev.conditions:
        out.append("This run has no original condition, so no drift is measured: each RealR stands alone.")
    elif ev.calibrated is not None:
        out.append(
            f"The thresholds were recalibrated to RealR {pct(ev.calibrated)}% on this run's own original videos, the "
            "ones the drifts are measured on: each sits at the edge of their original scores, so a small rise of a "
            "score under a condition reads as a drop, and on few videos the drifts lean toward drops."
        )
    else:
        out += _unfit(ev)
    return out


def _unfit(ev: RealsEvaluation) -> list[str]:
    out = []
    for det in ev.detectors:
        c = ev.cell(det, "original")
        scored = c.n_real - c.failures
        kept = c.real_recall * c.n_real / scored if scored else None
        if kept is not None and kept < UNFIT_REAL_RECALL:
            out.append(
                f"{det}'s threshold ({c.threshold:.4g}) keeps only {pct(kept)}% of the scored real videos real on "
                "original: it does not fit this footage (a card's threshold is set for RealR 95% on its own "
                "calibration set). `lastmile report RUN --calibrate 0.95` recalibrates it on this run's original "
                "reals, after which RealR on original is as near that target as these videos allow and only the "
                "drifts tell."
            )
    return out


def glossary(ev: RealsEvaluation) -> list[Term]:
    """Every quantity the table shows."""
    return [
        Term(
            "RealR",
            "Share of the real videos kept real (scored below the detector's threshold), pooled over the "
            "run's real videos; a video error counts as a miss, an infrastructure error in no metric. "
            + UNDECIDED.format(metrics="RealR, RealR drift and flips to generated"),
        ),
        Term(
            "95% CI",
            f"{INTERVAL}: {ev.replicates} bootstrap replicates (seed {ev.seed}), the anchor the unit of resampling.",
        ),
        Term(
            "RealR drift",
            "RealR(condition) - RealR(original) in percentage points: the difference of the two "
            "RealRs shown, with a paired interval on the videos decided under both; below 0: the condition makes "
            "the detector flag more real videos.",
        ),
        Term(
            "flips to generated",
            "Of the real videos kept real on original and decided under the condition, "
            "the share decided generated there (%, PROTOCOL.md's flips to generated), with the hull of the "
            "anchor-clustered bootstrap's and Wilson's interval. The drift is net: videos a condition clears offset "
            "those it flags, so a drift of 0 can hide flips; this share does not.",
        ),
        Term(
            "real videos",
            "The cell's real videos, video errors included and infrastructure errors not: RealR's denominator.",
        ),
        Term("failures", "Real videos of the cell with a video error (in RealR as misses)."),
        Term(
            "infra errors",
            "Rows without a decision: a scorer that could not answer, or no worker that could start (in no metric).",
        ),
    ]


def _context(ev: RealsEvaluation, rows: list[ScoreRow], info: dict) -> dict:
    ctx = run_context(ev, rows, info, INTERVAL)
    return ctx | {"kind": "reals_only", "findings": real_recall_drops(ev), "warnings": cautions(ev)}


def _as_json(ev: RealsEvaluation, ctx: dict, terms: list[Term]) -> dict:
    head = {"kind": "reals_only", "reals_only": REALS_ONLY}
    tail = {"notice": reals_notice(ctx), "glossary": {t.term: t.definition for t in terms}}
    return head | report_json(ev, ctx) | tail
