"""The report's plots (matplotlib, Agg): PNG files, each with a caption for the reader."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from detectors import metrics
from gateway.core.messages import ScoreRow
from gateway.evaluation.paired import Evaluation


@dataclass(frozen=True)
class Figure:
    """A plot written to ``path``, with the caption a reader sees under it."""

    key: str
    path: Path
    caption: str


def make_plots(ev: Evaluation, rows: list[ScoreRow], folder: Path) -> list[Figure]:
    """Every plot of the report, written as PNG files into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    return [
        Figure(
            "auc",
            _plot_auc(ev, folder / "auc_by_condition.png"),
            "AUC of each detector under each condition, with 95% anchor-clustered bootstrap intervals "
            "(the shape of RA-Bench's Figure 11); the dashed line is chance.",
        ),
        Figure(
            "recall",
            _plot_recall(ev, folder / "fake_real_recall.png"),
            "FakeR and RealR at the threshold fixed on original and held for every condition: "
            "where a curve falls, the detector's operating point drifted.",
        ),
        Figure(
            "roc",
            _plot_roc(rows, ev, folder / "roc_original_vs_full.png"),
            "ROC curves of each detector on original (solid) and under full dissemination (dashed), "
            "pooled over sources, with their AUCs.",
        ),
        Figure(
            "heatmap",
            _plot_heatmap(ev, folder / "source_condition_auc.png"),
            "Per-source AUC for each detector: which generation source each condition hides.",
        ),
        Figure(
            "rank",
            _plot_rank(ev, folder / "rank_correlation.png"),
            "Spearman correlation of the detector ranking (by AUC) between original and each condition.",
        ),
    ]


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
