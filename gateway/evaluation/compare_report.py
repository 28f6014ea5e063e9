"""The comparisons as the report gives them: a table per comparison (Markdown, from
:class:`~gateway.evaluation.tables.Table`) with its notes and cautions, ``comparison.md`` and ``comparison.json``.
The forest plots are :mod:`gateway.evaluation.plots`'; the numbers, :mod:`gateway.evaluation.compare`'s."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from gateway.core import ab_quantities as ab
from gateway.core.ab_quantities import ROLES
from gateway.core.contenders import Contender
from gateway.core.messages import ScoreRow
from gateway.core.wording import counted
from gateway.evaluation import jsonout
from gateway.evaluation.caveats import ZERO_WIDTH_EXAMPLES, small_sample_warnings, unfit_threshold_warnings
from gateway.evaluation.compare import Comparison, Estimate, compare_each, compare_shared
from gateway.evaluation.tables import ZERO_WIDTH, Table, TableRow, pct, points, zero_width
from gateway.evaluation.thresholds import threshold_text

# the quantities whose interval is the bootstrap's alone, so it can have zero width
BOOTSTRAPPED = (ab.AUC_DIFFERENCE, ab.ROBUSTNESS_DIFFERENCE)
NOTE = (
    "Challenger minus champion on the videos both scored, in percentage points, with 95% intervals: ΔAUC and "
    "Δrobustness anchor-clustered paired bootstrap, on the videos every AUC compared scored; ΔFakeR, ΔRealR, "
    "disagree and Δflip rate the hull of that bootstrap's interval and a score interval (Newcombe's paired, "
    "method 10; Wilson's for disagree), which keeps an anchor's videos together and never collapses. Δrobustness: "
    "the challenger's AUC drift from original minus the champion's (below 0: the challenger loses more). "
    "FakeR/RealR at each detector's threshold (below). disagree: share of videos decided differently; Δflip "
    "rate: difference of the shares of videos whose decision differs from their decision on original."
)


def estimate_cell(e: Estimate | None, signed: bool = True) -> str:
    """A point with its interval in a comparison table, in points (``signed``: a difference) or %; ``-`` where
    it is undefined."""
    if e is None or not math.isfinite(e[0]):
        return "-"
    point, (lo, hi) = e
    return f"{points(point) if signed else pct(point)} [{pct(lo)}, {pct(hi)}]"


def _marked(e: Estimate | None, quantity: ab.Quantity) -> str:
    """A cell of the table, its interval marked † by the caution's own rule (a bootstrap-only zero width)."""
    zero = quantity in BOOTSTRAPPED and e is not None and math.isfinite(e[0]) and zero_width(e[1])
    return estimate_cell(e, quantity.signed) + (ZERO_WIDTH if zero else "")


def comparison_table(cmp: Comparison) -> Table:
    rows = tuple(
        TableRow((c.condition, str(c.videos), *(_marked(getattr(c, q.name), q) for q in ab.QUANTITIES)))
        for c in cmp.conditions
    )
    title = f"{cmp.challenger} (challenger) vs {cmp.champion} (champion)"
    header = ("condition", "videos", *(q.heading for q in ab.QUANTITIES))
    return Table(title, header, rows, (NOTE, thresholds_note(cmp)), tuple(cmp.warnings))


def thresholds_note(cmp) -> str:
    """The note under a comparison's table (of a :class:`Comparison` or a reals-only one): each contender's
    threshold and where it comes from, the anchors and the bootstrap."""
    names = {"champion": cmp.champion, "challenger": cmp.challenger}
    thresholds = ", ".join(f"{names[role]} ({role}) {threshold_text(t)}" for role, t in cmp.thresholds.items())
    origin = "their cards'" if cmp.calibrated is None else f"recalibrated to RealR {pct(cmp.calibrated)} % on original"
    return (
        f"Thresholds: {thresholds} ({origin}); {counted(cmp.anchors, 'anchor')}, {cmp.replicates} replicates, "
        f"seed {cmp.seed}."
    )


def compare_pairs(
    shared: list[list[ScoreRow]],
    pairs: list[tuple[Contender, Contender]],
    replicates: int,
    seed: int | None = None,
    calibrate: float | None = None,
) -> list[Comparison]:
    """Every (champion, challenger) of ``pairs`` compared on its rows of ``shared`` (:func:`paired_rows`), with
    its :func:`comparison_warnings`."""
    compared = compare_each(compare_shared, shared, pairs, replicates, seed, calibrate)
    return [
        dataclasses.replace(cmp, warnings=comparison_warnings(cmp, rows))
        for cmp, rows in zip(compared, shared, strict=True)
    ]


def comparison_warnings(cmp: Comparison, rows: list[ScoreRow]) -> list[str]:
    """The report's cautions (:mod:`gateway.evaluation.caveats`) for a comparison on the rows it compared: sources
    with few anchors, ΔAUC or Δrobustness intervals of zero width (the others take the hull with a score interval,
    which never has), and a contender whose card's threshold keeps under half its scored reals real."""
    out = small_sample_warnings(rows)
    zero = [
        f"{q.heading} under {c.condition} {cell}"
        for c in cmp.conditions
        for q in BOOTSTRAPPED
        if ZERO_WIDTH in (cell := _marked(getattr(c, q.name), q))
    ]
    if zero:
        out.append(
            f"{counted(len(zero), 'bootstrap interval has', 'bootstrap intervals have')} zero width (marked "
            f"{ZERO_WIDTH}), e.g. "
            f"{'; '.join(zero[:ZERO_WIDTH_EXAMPLES])}. Every replicate gave the same difference, typically because "
            "both contenders separated the classes perfectly on few anchors: no variation in this sample, not "
            "certainty."
        )
    if cmp.calibrated is None:
        for role in ROLES:
            out += unfit_threshold_warnings(rows, role, cmp.thresholds[role], f"{getattr(cmp, role)} ({role})")
    return out


def clear_comparisons(folder: Path) -> None:
    """Remove what an earlier ``--compare`` wrote into ``folder``, so no file outlives the report it belonged to."""
    for path in [folder / "comparison.md", folder / "comparison.json", *(folder / "plots").glob("compare_*.png")]:
        path.unlink(missing_ok=True)


def write_comparisons(
    comparisons: list[Comparison], folder: Path, plots: list[Path], notice: str | None = None
) -> dict[str, Path]:
    """``comparison.md`` and ``comparison.json`` in ``folder`` (the report embeds the same tables and ``plots``, one
    forest plot per comparison, drawn by :func:`gateway.evaluation.plots.comparison_figures`); ``notice``: the
    corpus's (a proxy corpus says so), at the top of the one and in each entry of the other."""
    parts = ["# Champion vs challenger\n", *([f"\n> **{notice}**\n"] if notice else [])]
    out = {}
    for cmp, plot in zip(comparisons, plots, strict=True):
        table = comparison_table(cmp)
        out[f"plot_{plot.stem}"] = plot
        parts.append(f"\n## {table.title}\n\n{table.to_markdown()}\n![forest plot](plots/{plot.name})\n")
    out["comparison_md"] = folder / "comparison.md"
    out["comparison_json"] = folder / "comparison.json"
    out["comparison_md"].write_text("".join(parts))
    out["comparison_json"].write_text(jsonout.dumps(comparisons_json(comparisons, notice)))
    return out


def comparisons_json(comparisons: list[Comparison], notice: str | None = None) -> list[dict]:
    """The comparisons' numbers as JSON-ready dicts (``comparison.json`` and report.json's ``comparisons``), each
    with the corpus's ``notice`` (None where the corpus states none)."""
    return [dataclasses.asdict(c) | {"corpus_notice": notice} for c in comparisons]
