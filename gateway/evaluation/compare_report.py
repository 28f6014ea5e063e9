"""A comparison written out: a table per comparison (Markdown, from :class:`~gateway.evaluation.tables.Table`),
a forest plot with one row per condition and one panel per quantity, and the numbers as JSON."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from gateway.core.contenders import PairError, distinct_pairs, split_pair
from gateway.core.messages import ScoreRow
from gateway.core.wording import counted
from gateway.evaluation import jsonout
from gateway.evaluation.caveats import ZERO_WIDTH_EXAMPLES, small_sample_warnings, unfit_threshold_warnings
from gateway.evaluation.compare import ROLES, Comparison, Contender, Estimate, compare_shared, shared_rows
from gateway.evaluation.errors import EvaluationError
from gateway.evaluation.plots import Figure
from gateway.evaluation.tables import ZERO_WIDTH, Row, Table, pct, points, zero_width
from gateway.evaluation.thresholds import threshold_text

BOOTSTRAPPED = (  # (attribute, heading): the bootstrap's alone, so their intervals can have zero width
    ("auc_difference", "ΔAUC"),
    ("robustness_difference", "Δrobustness"),
)
QUANTITIES = (  # (attribute, heading): every one challenger minus champion, in percentage points
    *BOOTSTRAPPED,
    ("fake_recall_difference", "ΔFakeR"),
    ("real_recall_difference", "ΔRealR"),
    ("disagreement", "disagree"),
    ("flip_rate_difference", "Δflip rate"),
)
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


def _marked(e: Estimate | None, key: str) -> str:
    """A cell of the table, its interval marked † by the caution's own rule (a bootstrap-only zero width)."""
    zero = key in dict(BOOTSTRAPPED) and e is not None and math.isfinite(e[0]) and zero_width(e[1])
    return estimate_cell(e, key != "disagreement") + (ZERO_WIDTH if zero else "")


def comparison_table(cmp: Comparison) -> Table:
    rows = tuple(
        Row((c.condition, str(c.videos), *(_marked(getattr(c, key), key) for key, _ in QUANTITIES)))
        for c in cmp.conditions
    )
    title = f"{cmp.challenger} (challenger) vs {cmp.champion} (champion)"
    header = ("condition", "videos", *(h for _, h in QUANTITIES))
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


def forest_plot(cmp: Comparison, path: Path) -> Path:
    """One panel per quantity, one row per condition: the estimate with its interval; the line marks 0."""
    names = [c.condition for c in cmp.conditions]
    fig, axes = plt.subplots(1, len(QUANTITIES), figsize=(3.0 * len(QUANTITIES), 0.5 * len(names) + 1.5), sharey=True)
    for ax, (key, heading) in zip(axes, QUANTITIES, strict=True):
        for y, c in enumerate(cmp.conditions):
            e = getattr(c, key)
            if e is None:
                continue
            point, (lo, hi) = e
            ax.errorbar(
                [100 * point], [y], xerr=[[100 * (point - lo)], [100 * (hi - point)]], fmt="o", capsize=3, color="C0"
            )
        ax.axvline(0, color="grey", linestyle="--", linewidth=1)
        ax.set_title(heading)
        ax.set_xlabel("points")
    axes[0].set_yticks(range(len(names)), names)
    axes[0].invert_yaxis()
    fig.suptitle(f"{cmp.challenger} (challenger) minus {cmp.champion} (champion)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def parse_pairs(pairs: list[str] | tuple[str, ...]) -> list[tuple[Contender, Contender]]:
    """Each ``CHAMPION:CHALLENGER`` as two contenders (:func:`gateway.core.contenders.split_pair`); a malformed
    or repeated one raises :class:`EvaluationError` before any work is done."""
    try:
        sides = [split_pair(pair) for pair in pairs]
        distinct_pairs(sides)
    except PairError as exc:
        raise EvaluationError(str(exc)) from exc
    return [(Contender.parse(champion), Contender.parse(challenger)) for champion, challenger in sides]


def paired_rows(rows: list[ScoreRow], pairs: list[tuple[Contender, Contender]]) -> list[list[ScoreRow]]:
    """Each pair's :func:`~gateway.evaluation.compare.shared_rows` (which raises where a contender has no rows)."""
    return [shared_rows(rows, champion, challenger) for champion, challenger in pairs]


def compare_pairs(
    shared: list[list[ScoreRow]],
    pairs: list[tuple[Contender, Contender]],
    replicates: int,
    seed: int | None = None,
    calibrate: float | None = None,
) -> list[Comparison]:
    """Every (champion, challenger) of ``pairs`` compared on its rows of ``shared`` (:func:`paired_rows`), with
    its :func:`comparison_warnings`."""
    extra = {"seed": seed} if seed is not None else {}
    out = []
    for rows, pair in zip(shared, pairs, strict=True):
        cmp = compare_shared(rows, *pair, replicates, calibrate=calibrate, **extra)
        out.append(dataclasses.replace(cmp, warnings=comparison_warnings(cmp, rows)))
    return out


def comparison_warnings(cmp: Comparison, rows: list[ScoreRow]) -> list[str]:
    """The report's cautions (:mod:`gateway.evaluation.caveats`) for a comparison on the rows it compared: sources
    with few anchors, ΔAUC or Δrobustness intervals of zero width (the others take the hull with a score interval,
    which never has), and a contender whose card's threshold keeps under half its scored reals real."""
    out = small_sample_warnings(rows)
    zero = [
        f"{heading} under {c.condition} {cell}"
        for c in cmp.conditions
        for key, heading in BOOTSTRAPPED
        if ZERO_WIDTH in (cell := _marked(getattr(c, key), key))
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


def comparison_figures(comparisons: list[Comparison], folder: Path) -> list[Figure]:
    """One forest plot per comparison, ``compare_<i>.png`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    return [
        Figure(
            f"compare_{i}",
            forest_plot(cmp, folder / f"compare_{i}.png"),
            f"{cmp.challenger} minus {cmp.champion} per condition, in points, with the 95% intervals of the table "
            "above; the dashed line is no difference.",
        )
        for i, cmp in enumerate(comparisons)
    ]


def clear_comparisons(folder: Path) -> None:
    """Remove what an earlier ``--compare`` wrote into ``folder``, so no file outlives the report it belonged to."""
    for path in [folder / "comparison.md", folder / "comparison.json", *(folder / "plots").glob("compare_*.png")]:
        path.unlink(missing_ok=True)


def write_comparisons(
    comparisons: list[Comparison], folder: Path, figures: list[Figure], notice: str | None = None
) -> dict[str, Path]:
    """``comparison.md`` and ``comparison.json`` in ``folder`` (the report embeds the same tables and plots);
    ``notice``: the corpus's (a proxy corpus says so), at the top of the one and in each entry of the other."""
    parts = ["# Champion vs challenger\n", *([f"\n> **{notice}**\n"] if notice else [])]
    out = {}
    for cmp, fig in zip(comparisons, figures, strict=True):
        table = comparison_table(cmp)
        out[f"plot_{fig.key}"] = fig.path
        parts.append(f"\n## {table.title}\n\n{table.to_markdown()}\n![forest plot](plots/{fig.path.name})\n")
    out["comparison_md"] = folder / "comparison.md"
    out["comparison_json"] = folder / "comparison.json"
    out["comparison_md"].write_text("".join(parts))
    out["comparison_json"].write_text(jsonout.dumps(comparisons_json(comparisons, notice)))
    return out


def comparisons_json(comparisons: list[Comparison], notice: str | None = None) -> list[dict]:
    """The comparisons' numbers as JSON-ready dicts (``comparison.json`` and report.json's ``comparisons``), each
    with the corpus's ``notice`` (None where the corpus states none)."""
    return [dataclasses.asdict(c) | {"corpus_notice": notice} for c in comparisons]
