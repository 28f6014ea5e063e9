"""``lastmile report RUN_DIR``: report.md, report.json and a self-contained report.html with PNG plots.

The Markdown and HTML are rendered by jinja2 templates (``templates/``) from the same table objects
(:mod:`gateway.evaluation.tables`) and figures (:mod:`gateway.evaluation.plots`); the JSON holds the numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from gateway.core.messages import ScoreRow
from gateway.evaluation import jsonout
from gateway.evaluation.caveats import sample_warnings
from gateway.evaluation.compare import Comparison, compare_each, paired_rows, parse_pairs
from gateway.evaluation.compare_report import (
    clear_comparisons,
    compare_pairs,
    comparison_table,
    comparisons_json,
    write_comparisons,
)
from gateway.evaluation.findings import key_findings
from gateway.evaluation.flips_report import ARROWS, KINDS, SHOWN, FlipSection, clear_strips, flip_sections
from gateway.evaluation.glossary import glossary
from gateway.evaluation.paired import Evaluation, by_version, evaluate
from gateway.evaluation.plots import Figure, comparison_figures, make_plots
from gateway.evaluation.provenance import corpus_notice, in_run_order, read_run, report_json, run_context
from gateway.evaluation.reals import compare_reals, evaluate_reals, is_reals_only, own_anchors
from gateway.evaluation.reals_report import build_reals_report
from gateway.evaluation.rendering import environment
from gateway.evaluation.sweeps import sweep_figures, sweep_json, sweep_tables
from gateway.evaluation.tables import Table, means, report_tables

BOOTSTRAP_INTERVAL = (
    "95% percentile, anchor-clustered; the FakeR and RealR drifts' widened to hold Newcombe's paired score interval"
)


def evaluate_rows(
    rows: list[ScoreRow], info: dict, replicates: int = 2000, seed: int | None = None, calibrate: float | None = None
) -> Evaluation:
    """The rows' evaluation, conditions in the run's own order (a sweep's values as listed, mildest first);
    ``calibrate``: a RealR to recalibrate every threshold to on the run's ``original`` reals (else the cards')."""
    return _measured(evaluate, rows, info, replicates, seed, calibrate)


def _measured(measure, rows: list[ScoreRow], info: dict, replicates: int, seed: int | None, calibrate: float | None):
    """``measure`` (:func:`~gateway.evaluation.paired.evaluate` or :func:`~gateway.evaluation.reals.evaluate_reals`)
    of the rows, at the default seed unless one is given, its conditions in the run's own order."""
    extra = {"seed": seed} if seed is not None else {}
    ev = measure(rows, replicates=replicates, calibrate_on_original=calibrate, **extra)
    ev.conditions = in_run_order(ev.conditions, info)
    return ev


def evaluate_run(run_dir: Path, replicates: int = 2000, seed: int | None = None) -> tuple[list, dict, Evaluation]:
    """A run's rows, its ``run.json`` and their evaluation (:func:`evaluate_rows`)."""
    rows, info = read_run(run_dir)
    return rows, info, evaluate_rows(rows, info, replicates, seed)


def build_report(
    run_dir: Path,
    replicates: int = 2000,
    seed: int | None = None,
    comparisons: Sequence[str] = (),
    calibrate: float | None = None,
    flips: int = SHOWN,
) -> dict[str, Path]:
    """Evaluate ``run_dir/results.parquet`` and write the three report files and the plots; return their paths.

    Each ``CHAMPION:CHALLENGER`` of ``comparisons`` gets its section in the report (table and forest plot, and
    its numbers under ``comparisons`` in report.json), and comparison.md/.json beside it; a pair that is
    malformed or names a contender without rows fails before the bootstrap runs. ``calibrate``: see
    :func:`evaluate_rows`. ``flips``: the flipped videos shown per detector, condition and direction, each with its
    frame strip (:mod:`gateway.evaluation.flips_report`; 0: counts only)."""
    pairs = parse_pairs(comparisons)
    rows, info = read_run(run_dir)
    if is_reals_only(rows):
        return _reals_report(run_dir, rows, info, replicates, seed, pairs, calibrate, flips)
    # raises where a contender has no rows
    shared = paired_rows(rows, pairs)
    ev = evaluate_rows(rows, info, replicates, seed, calibrate)
    contests = compare_pairs(shared, pairs, ev.replicates, seed, calibrate)
    ctx = _context(ev, rows, info)
    # a run without a single score has nothing to plot: its banner says so
    figures = []
    if ctx["failures"]["scored_rows"]:
        figures = make_plots(ev, rows, run_dir / "plots") + sweep_figures(ev, run_dir / "plots")
    clear_comparisons(run_dir)
    # a contrast without a score draws no marker
    forests = comparison_figures(contests, run_dir / "plots")
    sections = [(comparison_table(c), f) for c, f in zip(contests, forests, strict=True)]
    clear_strips(run_dir)
    flipped = flip_sections(rows, ev.conditions, run_dir, flips, {c.detector: c.threshold for c in ev.cells})
    out = {"json": run_dir / "report.json", "md": run_dir / "report.md", "html": run_dir / "report.html"}
    out["json"].write_text(jsonout.dumps(_as_json(ev, ctx, contests) | {"flips": [s.as_json() for s in flipped[0]]}))
    out["md"].write_text(render("report.md.j2", ev, ctx, figures, sections, flipped))
    out["html"].write_text(render("report.html.j2", ev, ctx, figures, sections, flipped))
    if contests:
        out |= write_comparisons(contests, run_dir, [f.path for f in forests], corpus_notice(ctx))
    return out


def _reals_report(
    run_dir: Path, rows: list[ScoreRow], info: dict, replicates: int, seed: int | None, pairs: list, calibrate, flips
) -> dict[str, Path]:
    """The report of a run of real videos only (:mod:`gateway.evaluation.reals_report`), with a RealR comparison
    (:mod:`gateway.evaluation.reals`) per pair."""
    # raises where a contender has no rows, before the bootstrap
    shared = paired_rows(rows, pairs)
    ev = _measured(evaluate_reals, rows, info, replicates, seed, calibrate)
    # a video without an anchor is its own
    reals = [own_anchors(s) for s in shared]
    contests = compare_each(compare_reals, reals, pairs, ev.replicates, seed, calibrate)
    clear_strips(run_dir)
    flipped = flip_sections(rows, ev.conditions, run_dir, flips, {c.detector: c.threshold for c in ev.cells})
    return build_reals_report(run_dir, rows, info, ev, contests, flipped)


def render(
    template: str,
    ev: Evaluation,
    ctx: dict,
    figures: list[Figure],
    comparisons: Sequence[tuple[Table, Figure]] = (),
    flipped: tuple[list[FlipSection], str | None] = ([], None),
) -> str:
    """One of the report templates, from the evaluation's tables and figures (HTML autoescaped); ``comparisons``:
    the champion vs challenger sections, a table and a forest plot each; ``flipped``: the flipped videos' sections
    and why no strip could be drawn (:func:`~gateway.evaluation.flips_report.flip_sections`)."""
    return (
        environment()
        .get_template(template)
        .render(
            ev=ev,
            ctx=ctx,
            tables=report_tables(ev) + sweep_tables(ev),
            figures=figures,
            comparisons=comparisons,
            notice=corpus_notice(ctx),
            glossary=glossary(ev),
            generators=(ctx["corpus"].get("generators") or {}) if ctx["proxy"] else {},
            flips=flipped[0],
            flips_why=flipped[1],
            arrows=ARROWS,
            kinds=KINDS,
        )
    )


def _context(ev: Evaluation, rows: list[ScoreRow], info: dict) -> dict:
    findings = {"findings": key_findings(ev), "warnings": sample_warnings(ev, by_version(rows))}
    return run_context(ev, rows, info, BOOTSTRAP_INTERVAL) | findings


def _as_json(ev: Evaluation, ctx: dict, contests: list[Comparison]) -> dict:
    return report_json(ev, ctx) | {
        "rank_correlation": ev.rank_correlation,
        "mean_over_detectors": means(ev),
        "sweeps": sweep_json(ev),
        "glossary": {t.term: t.definition for t in glossary(ev)},
        "comparisons": comparisons_json(contests, corpus_notice(ctx)),
        "chat": [dataclasses.asdict(c) for c in ev.chat],
    }
