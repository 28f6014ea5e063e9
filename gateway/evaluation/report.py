"""``lastmile report RUN_DIR``: report.md, report.json and a self-contained report.html with PNG plots.

The tables follow RA-Bench's LastMile table (Table 31) and Figure 11: AUC per condition per detector with
bootstrap intervals, drift from ``original``, FakeR/RealR at the fixed threshold, T@1%, T@5%, F@95%, and the
Spearman correlation of the detector ranking between ``original`` and each condition.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from detectors import metrics
from gateway.batch.results import RESULTS, read_results
from gateway.core.messages import ScoreRow
from gateway.evaluation.paired import Evaluation, evaluate

PROXY_WARNING = (
    "This run uses lastmile-gateway's self-made proxy corpus: synthetic camera-like scenes and pseudo-generators. "
    "It is a proxy for AI-generated video, not AI-generated video; its numbers show how detectors respond to "
    "dissemination on that proxy, not how they perform on real generators."
)


def build_report(run_dir: Path, replicates: int = 2000, seed: int | None = None) -> dict[str, Path]:
    """Evaluate ``run_dir/results.parquet`` and write the three report files and the plots; return their paths."""
    rows = read_results(run_dir / RESULTS)
    info = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    ev = evaluate(rows, replicates=replicates, **({"seed": seed} if seed is not None else {}))
    plots = _plots(ev, rows, run_dir / "plots")
    context = _context(ev, rows, info)
    out = {
        "json": run_dir / "report.json",
        "md": run_dir / "report.md",
        "html": run_dir / "report.html",
    }
    out["json"].write_text(json.dumps(_as_json(ev, context), indent=2, default=_json_default))
    out["md"].write_text(markdown(ev, context))
    out["html"].write_text(_html(ev, context, plots))
    return out


def _json_default(o: object) -> object:
    if isinstance(o, float | np.floating) and not np.isfinite(o):
        return None
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o))


def _context(ev: Evaluation, rows: list[ScoreRow], info: dict) -> dict:
    corpus = info.get("corpus") or {}
    is_proxy = bool(corpus.get("notice", "")) and "PROXY" in corpus.get("notice", "")
    versions = sorted({f"{r.detector} {r.detector_version} ({r.runtime})" for r in rows})
    profiles = sorted({r.profile for r in rows if r.profile})
    return {
        "proxy": is_proxy,
        "corpus": corpus,
        "corpus_seed": (corpus.get("config") or {}).get("seed"),
        "manifest": (info.get("config") or {}).get("manifest"),
        "anchors": ev.anchors,
        "videos": ev.videos,
        "rows": len(rows),
        "failures": sum(r.error_kind == "video" for r in rows),
        "infra_errors": sum(r.error_kind == "infra" for r in rows),
        "bootstrap": {"replicates": ev.replicates, "seed": ev.seed, "interval": "95% percentile, anchor-clustered"},
        "detectors": versions,
        "profiles": profiles,
        "spec_hashes": sorted({(r.condition, r.spec_hash) for r in rows if r.spec_hash}),
    }


def _as_json(ev: Evaluation, ctx: dict) -> dict:
    return {
        "context": {**ctx, "spec_hashes": [{"condition": c, "spec_hash": h} for c, h in ctx["spec_hashes"]]},
        "notice": PROXY_WARNING if ctx["proxy"] else None,
        "cells": [dataclasses.asdict(c) for c in ev.cells],
        "rank_correlation": ev.rank_correlation,
        "mean_over_detectors": _means(ev),
    }


def _means(ev: Evaluation) -> dict[str, dict[str, float]]:
    out = {}
    for cond in ev.conditions:
        cells = [ev.cell(d, cond) for d in ev.detectors]
        out[cond] = {
            k: float(np.nanmean([getattr(c, k) for c in cells]))
            for k in ("auc", "fake_recall", "real_recall", "bacc", "tpr_at_5")
        }
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{100 * x:.1f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None or not np.isfinite(ci[0]) else f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def main_table(ev: Evaluation) -> str:
    """The headline table: AUC (95 % CI) per detector and condition, with the drift from original."""
    head = "| detector | " + " | ".join(ev.conditions) + " |\n|---|" + "---|" * len(ev.conditions) + "\n"
    body = ""
    for det in ev.detectors:
        cells = []
        for cond in ev.conditions:
            c = ev.cell(det, cond)
            drift = "" if cond == "original" or c.auc_drift is None else f" ({100 * c.auc_drift:+.1f})"
            cells.append(f"{_pct(c.auc)}{_ci(c.auc_ci)}{drift}")
        body += f"| {det} | " + " | ".join(cells) + " |\n"
    means = _means(ev)
    body += "| **mean** | " + " | ".join(_pct(means[c]["auc"]) for c in ev.conditions) + " |\n"
    body += (
        "| **Spearman vs original** | "
        + " | ".join(
            "-" if not np.isfinite(ev.rank_correlation.get(c, np.nan)) else f"{ev.rank_correlation[c]:.2f}"
            for c in ev.conditions
        )
        + " |\n"
    )
    return head + body


def operating_table(ev: Evaluation) -> str:
    head = (
        "| detector | condition | FakeR | RealR | BAcc | macro-F1 | T@1% | T@5% | F@95% | FakeR drift | failures |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = ""
    for c in ev.cells:
        body += (
            f"| {c.detector} | {c.condition} | {_pct(c.fake_recall)}{_ci(c.fake_recall_ci)} | "
            f"{_pct(c.real_recall)}{_ci(c.real_recall_ci)} | {_pct(c.bacc)} | {_pct(c.macro_f1)} | "
            f"{_pct(c.tpr_at_1)} | {_pct(c.tpr_at_5)} | {_pct(c.fpr_at_95)} | "
            f"{'-' if c.fake_recall_drift is None else f'{100 * c.fake_recall_drift:+.1f}'} | {c.failures} |\n"
        )
    return head + body


def markdown(ev: Evaluation, ctx: dict) -> str:
    lines = ["# LastMile robustness report", ""]
    if ctx["proxy"]:
        lines += [f"> **{PROXY_WARNING}**", ""]
        gens = ctx["corpus"].get("generators") or {}
        if gens:
            lines += ["Pseudo-generators of the proxy corpus:", ""]
            lines += [f"- `{k}`: {v['cue']} (cue scale: {v['scale']})" for k, v in gens.items()]
            lines += [""]
    lines += [
        f"Corpus: `{ctx['manifest']}` (seed {ctx['corpus_seed']}); "
        f"{ctx['anchors']} real anchors, {ctx['videos']} videos, "
        f"{len(ev.sources)} generation sources ({', '.join(ev.sources)}), {len(ev.conditions)} conditions, "
        f"{ctx['rows']} scored rows ({ctx['failures']} video failures kept in the denominators, "
        f"{ctx['infra_errors']} infrastructure errors counted apart).",
        f"Detectors: {', '.join(ctx['detectors'])}. Encoder profile: {', '.join(ctx['profiles']) or '-'}.",
        f"Metrics: paired per source against matched real anchors, sources weighted equally; 95 % intervals from "
        f"{ev.replicates} anchor-clustered bootstrap replicates (seed {ev.seed}). Thresholds fixed once (model card, "
        f"calibrated on `original`) and held for every condition.",
        "",
        "## AUC (%) per condition, 95 % CI, (drift from original)",
        "",
        main_table(ev),
        "## Operating points at the fixed threshold",
        "",
        operating_table(ev),
        "## Per-source AUC (%)",
        "",
        _source_table(ev),
        "## Spec hashes",
        "",
        "".join(f"- `{c}`: `{h}`\n" for c, h in ctx["spec_hashes"]),
    ]
    return "\n".join(lines)


def _source_table(ev: Evaluation) -> str:
    head = "| detector | condition | " + " | ".join(ev.sources) + " |\n|---|---|" + "---|" * len(ev.sources) + "\n"
    return head + "".join(
        f"| {c.detector} | {c.condition} | " + " | ".join(_pct(c.per_source_auc.get(s)) for s in ev.sources) + " |\n"
        for c in ev.cells
    )


# -- plots --------------------------------------------------------------------------------------------------
def _plots(ev: Evaluation, rows: list[ScoreRow], folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "auc": _plot_auc(ev, folder / "auc_by_condition.png"),
        "recall": _plot_recall(ev, folder / "fake_real_recall.png"),
        "roc": _plot_roc(rows, ev, folder / "roc_original_vs_full.png"),
        "heatmap": _plot_heatmap(ev, folder / "source_condition_auc.png"),
        "rank": _plot_rank(ev, folder / "rank_correlation.png"),
    }


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_auc(ev: Evaluation, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.2))
    x = np.arange(len(ev.conditions))
    width = 0.8 / max(len(ev.detectors), 1)
    for i, det in enumerate(ev.detectors):
        cells = [ev.cell(det, c) for c in ev.conditions]
        auc = np.array([c.auc for c in cells])
        lo = auc - np.array([c.auc_ci[0] for c in cells])
        hi = np.array([c.auc_ci[1] for c in cells]) - auc
        ax.bar(x + i * width - 0.4 + width / 2, auc, width, yerr=[lo, hi], capsize=2, label=det)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xticks(x, ev.conditions)
    ax.set_ylim(0, 1)
    ax.set_ylabel("AUC (95% CI)")
    ax.set_title("AUC per condition (Figure 11 shape)")
    ax.legend(fontsize=8, ncol=2)
    return _save(fig, path)


def _plot_recall(ev: Evaluation, path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for det in ev.detectors:
        for ax, key in zip(axes, ("fake_recall", "real_recall"), strict=True):
            ax.plot(ev.conditions, [getattr(ev.cell(det, c), key) for c in ev.conditions], marker="o", label=det)
    for ax, title in zip(axes, ("FakeR (fixed threshold)", "RealR (fixed threshold)"), strict=True):
        ax.set_title(title)
        ax.set_ylim(-0.02, 1.02)
        ax.tick_params(axis="x", rotation=30)
    axes[0].legend(fontsize=8)
    return _save(fig, path)


def _plot_roc(rows: list[ScoreRow], ev: Evaluation, path: Path) -> Path:
    fig, axes = plt.subplots(1, len(ev.detectors), figsize=(3.2 * len(ev.detectors), 3.2), squeeze=False)
    for ax, det in zip(axes[0], ev.detectors, strict=True):
        for cond, style in (("original", "-"), ("full", "--")):
            sel = [r for r in rows if r.detector == det and r.condition == cond and r.score is not None and r.label]
            y = np.array([r.label == "generated" for r in sel])
            if y.any() and (~y).any():
                fpr, tpr, _ = metrics.roc_points(y, np.array([r.score for r in sel]))
                ax.plot(fpr, tpr, style, label=f"{cond} ({metrics.auc(y, np.array([r.score for r in sel])):.2f})")
        ax.plot([0, 1], [0, 1], color="grey", lw=0.6)
        ax.set_title(det, fontsize=9)
        ax.set_xlabel("FPR")
        ax.legend(fontsize=7, loc="lower right")
    axes[0][0].set_ylabel("TPR")
    return _save(fig, path)


def _plot_heatmap(ev: Evaluation, path: Path) -> Path:
    fig, axes = plt.subplots(
        1,
        len(ev.detectors),
        figsize=(2.9 * len(ev.detectors) + 1.2, 0.5 * len(ev.sources) + 2),
        squeeze=False,
        layout="constrained",
    )
    for k, (ax, det) in enumerate(zip(axes[0], ev.detectors, strict=True)):
        grid = np.array([[ev.cell(det, c).per_source_auc.get(s, np.nan) for c in ev.conditions] for s in ev.sources])
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
        ax.set_xticks(range(len(ev.conditions)), ev.conditions, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(ev.sources)), ev.sources if k == 0 else [], fontsize=7)
        for (i, j), v in np.ndenumerate(grid):
            ax.text(j, i, "-" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=6)
        ax.set_title(det, fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="AUC")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_rank(ev: Evaluation, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(ev.conditions, [ev.rank_correlation.get(c, np.nan) for c in ev.conditions], marker="o")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("Spearman rho vs original")
    ax.set_title("Detector ranking stability")
    return _save(fig, path)


def _embed(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def _html(ev: Evaluation, ctx: dict, plots: dict[str, Path]) -> str:
    def table(md_table: str) -> str:
        lines = [ln for ln in md_table.strip().splitlines() if not set(ln) <= set("|-")]
        rows_html = []
        for i, ln in enumerate(lines):
            cells = [html.escape(c.strip().replace("**", "")) for c in ln.strip("|").split("|")]
            tag = "th" if i == 0 else "td"
            rows_html.append("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>")
        return "<table>" + "".join(rows_html) + "</table>"

    figs = "".join(
        f'<figure><img src="{_embed(p)}" alt="{k}"><figcaption>{k}</figcaption></figure>' for k, p in plots.items()
    )
    notice = f'<p class="notice">{html.escape(PROXY_WARNING)}</p>' if ctx["proxy"] else ""
    summary = html.escape(
        markdown(ev, ctx).split("## AUC")[0].replace("# LastMile robustness report", "").replace("> ", "")
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>LastMile robustness report</title>
<style>body{{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}}table{{border-collapse:collapse;
font-size:13px;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}th{{background:#eee}}
.notice{{background:#fff3cd;border:1px solid #e0c36a;padding:.8em;font-weight:bold}}img{{max-width:100%}}
figure{{margin:1em 0}}pre{{white-space:pre-wrap}}</style></head><body>
<h1>LastMile robustness report</h1>{notice}<pre>{summary}</pre>
<h2>AUC (%) per condition, 95% CI, (drift from original)</h2>{table(main_table(ev))}
{figs}
<h2>Operating points at the fixed threshold</h2>{table(operating_table(ev))}
<h2>Per-source AUC (%)</h2>{table(_source_table(ev))}
</body></html>"""
