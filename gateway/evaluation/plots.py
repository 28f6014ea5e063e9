"""The report's plots (matplotlib, Agg): PNG files, each with a caption for the reader."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from detectors.stats import metrics
from gateway.core.ab_quantities import QUANTITIES
from gateway.core.messages import ScoreRow
from gateway.evaluation.compare import Comparison
from gateway.evaluation.paired import Evaluation, by_version

# panel titles
RECALLS = {"fake_recall": "FakeR (fixed threshold)", "real_recall": "RealR (fixed threshold)"}
# every AUC and recall is drawn in %, as the tables give them
PERCENT = 100.0
DPI = 110
# heat-map panels per row: as many as fit this width (HTML shows ~11 in at 110 dpi)
HEATMAP_WIDTH_IN = 12.0


@dataclass(frozen=True)
class Figure:
    """A plot written to ``path``, with the caption a reader sees under it."""

    key: str
    path: Path
    caption: str


def make_plots(ev: Evaluation, rows: list[ScoreRow], folder: Path) -> list[Figure]:
    """Every plot of the report, written as PNG files into ``folder`` (``rows`` named per version where a detector
    has several, as ``ev``'s detectors are)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = by_version(rows)
    return [
        Figure(
            "auc",
            _plot_auc(ev, folder / "auc_by_condition.png"),
            "AUC (%) of each detector under each condition, with 95% anchor-clustered bootstrap intervals "
            "(the shape of RA-Bench's Figure 11); the dashed line is chance.",
        ),
        Figure(
            "recall",
            _plot_recall(ev, folder / "fake_real_recall.png"),
            "FakeR and RealR (%) at the threshold fixed on original and held for every condition, one marker per "
            "detector with its 95% anchor-clustered bootstrap interval (markers offset sideways to stay apart): "
            "where a detector's FakeR falls under a condition, its operating point drifted.",
        ),
        Figure(
            "roc",
            _plot_roc(rows, ev, folder / "roc_original_vs_full.png"),
            (
                "ROC curves of each detector on original (solid) and under full dissemination (dashed), "
                if "full" in ev.conditions
                else "ROC curves of each detector on original (this run has no `full` condition to set beside it), "
            )
            + "pooled over sources, with their AUCs (%).",
        ),
        Figure(
            "heatmap",
            _plot_heatmap(ev, folder / "source_condition_auc.png"),
            "Per-source AUC (%, rounded to whole points) for each detector: which generation source each "
            "condition hides.",
        ),
        Figure(
            "rank",
            _plot_rank(ev, folder / "rank_correlation.png"),
            "Spearman correlation of the detector ranking (by AUC) between original and each condition.",
        ),
    ]


def write(fig: plt.Figure, path: Path, tight: bool = False, **savefig: object) -> Path:
    """``fig`` written to ``path`` as PNG and closed; ``tight``: laid out first (a figure without a layout
    engine)."""
    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=DPI, **savefig)
    plt.close(fig)
    return path


def _plot_auc(ev: Evaluation, path: Path) -> Path:
    return write(auc_figure(ev), path)


def auc_figure(ev: Evaluation) -> plt.Figure:
    """AUC per condition in %, a bar per detector with its 95% bootstrap interval; the dashed line is chance."""
    fig, ax = plt.subplots(figsize=(max(8.0, 0.9 * len(ev.conditions) + 3), 4.4), layout="constrained")
    x = np.arange(len(ev.conditions))
    width = 0.8 / max(len(ev.detectors), 1)
    for i, det in enumerate(ev.detectors):
        cells = [ev.cell(det, c) for c in ev.conditions]
        auc = PERCENT * np.array([c.auc for c in cells])
        lo = np.nan_to_num(np.clip(auc - PERCENT * np.array([c.auc_ci[0] for c in cells]), 0, None))
        hi = np.nan_to_num(np.clip(PERCENT * np.array([c.auc_ci[1] for c in cells]) - auc, 0, None))
        ax.bar(x + i * width - 0.4 + width / 2, auc, width, yerr=[lo, hi], capsize=2, label=det)
    ax.axhline(PERCENT / 2, color="grey", lw=0.8, ls="--")
    ax.set_xticks(x, ev.conditions, rotation=30, ha="right", rotation_mode="anchor")
    ax.set_ylim(0, PERCENT)
    ax.set_ylabel("AUC, % (95% CI)")
    ax.set_title("AUC per condition (Figure 11 shape)")
    fig.legend(loc="outside right upper", fontsize=8)
    return fig


class Recalls(Protocol):
    """What :func:`recall_figure` draws from: the full evaluation's or the reals-only one's detectors, conditions
    and cells (each with ``fake_recall`` and ``real_recall`` and their ``_ci``, as the panels ask)."""

    detectors: list[str]
    conditions: list[str]

    def cell(self, detector: str, condition: str) -> Any: ...


def recall_figure(ev: Recalls, panels: tuple[str, ...] = tuple(RECALLS)) -> plt.Figure:
    """FakeR and RealR (``panels``: those of :data:`RECALLS` to draw) per condition as points with their 95%
    intervals: one marker per detector, dodged sideways so they do not overlap; conditions are categories, so no
    line joins them."""
    # many conditions: one panel above the other
    stacked = len(panels) > 1 and len(ev.conditions) > 6
    if stacked:
        shape, size = (2, 1), (max(8.0, 0.9 * len(ev.conditions) + 2.5), 7.5)
    else:
        # a lone panel: as wide as its conditions need
        one = max(6.0, 0.7 * len(ev.conditions) + 3.0)
        shape, size = (1, len(panels)), ((10.0, 4.2) if len(panels) > 1 else (one, 4.2))
    fig, axes = plt.subplots(*shape, figsize=size, sharey=True, layout="constrained", squeeze=False)
    axes = axes.ravel()
    x = np.arange(len(ev.conditions))
    n = max(len(ev.detectors), 1)
    step = min(0.7 / n, 0.18)
    markers = "osD^vP*Xh<>p"
    for i, det in enumerate(ev.detectors):
        offset = (i - (n - 1) / 2) * step
        for ax, key in zip(axes, panels, strict=True):
            cells = [ev.cell(det, c) for c in ev.conditions]
            y = PERCENT * np.array([getattr(c, key) for c in cells], dtype=float)
            lo, hi = (PERCENT * np.array([getattr(c, f"{key}_ci")[k] for c in cells], dtype=float) for k in (0, 1))
            # no interval: no bar, not a crash
            yerr = np.nan_to_num(np.clip([y - lo, hi - y], 0, None))
            ax.errorbar(
                x + offset,
                y,
                yerr=yerr,
                fmt=markers[i % len(markers)],
                ls="none",
                ms=6,
                capsize=3,
                color=f"C{i}",
                label=det,
            )
    for ax, key in zip(axes, panels, strict=True):
        ax.set_title(RECALLS[key])
        ax.set_ylim(-0.03 * PERCENT, 1.03 * PERCENT)
        ax.set_xticks(x, ev.conditions, rotation=30, ha="right", rotation_mode="anchor")
        ax.set_xlim(-0.6, len(ev.conditions) - 0.4)
        for k in x[1:]:
            # faint separators between categories instead of a line through them
            ax.axvline(k - 0.5, color="0.9", lw=0.8, zorder=0)
        ax.grid(axis="y", color="0.92")
    for ax in axes if stacked else axes[:1]:
        ax.set_ylabel("recall, % (95% CI)")
    # off the points
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right upper", fontsize=8)
    return fig


def _plot_recall(ev: Evaluation, path: Path) -> Path:
    return write(recall_figure(ev), path)


def _plot_roc(rows: list[ScoreRow], ev: Evaluation, path: Path) -> Path:
    fig, axes = plt.subplots(1, len(ev.detectors), figsize=(3.2 * len(ev.detectors), 3.2), squeeze=False)
    for ax, det in zip(axes[0], ev.detectors, strict=True):
        for cond, style in (("original", "-"), ("full", "--")):
            sel = [r for r in rows if r.detector == det and r.condition == cond and r.score is not None and r.label]
            y = np.array([r.label == "generated" for r in sel])
            if y.any() and (~y).any():
                fpr, tpr, _ = metrics.roc_points(y, np.array([r.score for r in sel]))
                auc = PERCENT * metrics.auc(y, np.array([r.score for r in sel]))
                ax.plot(fpr, tpr, style, label=f"{cond} (AUC {auc:.1f} %)")
        ax.plot([0, 1], [0, 1], color="grey", lw=0.6)
        ax.set_title(det, fontsize=9)
        ax.set_xlabel("FPR")
        if ax.get_legend_handles_labels()[1]:
            ax.legend(fontsize=7, loc="lower right")
        else:
            # a detector that scored nothing, or one class missing: no curve, said on its panel
            ax.text(0.5, 0.5, "no ROC: no scored videos\nof both classes", ha="center", va="center", fontsize=8)
    axes[0][0].set_ylabel("TPR")
    return write(fig, path, tight=True)


def heatmap_figure(ev: Evaluation) -> plt.Figure:
    """Per-source AUC, sources x conditions, one panel per detector (as many a row as fit HEATMAP_WIDTH_IN): the x
    labels rotated and anchored, the size grown with the grid, each value written in black or white to
    contrast with its cell."""
    n_det, n_cond, n_src = max(len(ev.detectors), 1), max(len(ev.conditions), 1), max(len(ev.sources), 1)
    label = max((len(c) for c in ev.conditions), default=8)
    panel_w, panel_h = 0.55 * n_cond + 0.6, 0.42 * n_src + 0.9 + 0.065 * label
    cols = max(1, min(n_det, int(HEATMAP_WIDTH_IN // panel_w)))
    rows = -(-n_det // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(panel_w * cols + 2.2, panel_h * rows + 0.4), squeeze=False, layout="constrained"
    )
    cmap = plt.get_cmap("RdYlGn")
    im = None
    for k, ax in enumerate(axes.flat):
        if k >= len(ev.detectors):
            ax.set_visible(False)
            continue
        det = ev.detectors[k]
        grid = PERCENT * np.array(
            [[ev.cell(det, c).per_source_auc.get(s, np.nan) for c in ev.conditions] for s in ev.sources]
        )
        grid = grid.reshape(len(ev.sources), len(ev.conditions))
        im = ax.imshow(grid, vmin=0, vmax=PERCENT, cmap=cmap, aspect="auto")
        ax.set_xticks(
            range(len(ev.conditions)), ev.conditions, rotation=40, ha="right", rotation_mode="anchor", fontsize=9
        )
        ax.set_yticks(range(len(ev.sources)), ev.sources if k % cols == 0 else [], fontsize=9)
        for (i, j), v in np.ndenumerate(grid):
            r, g, b, _ = cmap(v / PERCENT) if np.isfinite(v) else (1, 1, 1, 1)
            ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
            ax.text(j, i, "-" if np.isnan(v) else f"{v:.0f}", ha="center", va="center", fontsize=9, color=ink)
        ax.set_title(det, fontsize=10)
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="AUC (%)")
    return fig


def _plot_heatmap(ev: Evaluation, path: Path) -> Path:
    return write(heatmap_figure(ev), path, bbox_inches="tight")


def _plot_rank(ev: Evaluation, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(ev.conditions, [ev.rank_correlation.get(c, np.nan) for c in ev.conditions], marker="o")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("Spearman rho vs original")
    ax.set_title("Detector ranking stability")
    return write(fig, path, tight=True)


# -- champion against challenger (gateway/evaluation/compare.py computes; drawn here) -------------------------
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


def forest_plot(cmp: Comparison, path: Path) -> Path:
    """One panel per quantity, one row per condition: the estimate with its interval; the line marks 0."""
    names = [c.condition for c in cmp.conditions]
    fig, axes = plt.subplots(1, len(QUANTITIES), figsize=(3.0 * len(QUANTITIES), 0.5 * len(names) + 1.5), sharey=True)
    for ax, quantity in zip(axes, QUANTITIES, strict=True):
        for y, c in enumerate(cmp.conditions):
            e = getattr(c, quantity.name)
            if e is None:
                continue
            point, (lo, hi) = e
            ax.errorbar(
                [100 * point], [y], xerr=[[100 * (point - lo)], [100 * (hi - point)]], fmt="o", capsize=3, color="C0"
            )
        ax.axvline(0, color="grey", linestyle="--", linewidth=1)
        ax.set_title(quantity.heading)
        ax.set_xlabel("points")
    axes[0].set_yticks(range(len(names)), names)
    axes[0].invert_yaxis()
    fig.suptitle(f"{cmp.challenger} (challenger) minus {cmp.champion} (champion)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
