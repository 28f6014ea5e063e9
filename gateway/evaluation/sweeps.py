"""Severity sweeps in the report: per sweep, the curve of each detector (AUC and FakeR against the swept
parameter, with their paired bootstrap bands) and the breaking points: the mildest setting whose AUC drift
interval vs ``original`` lies wholly below -0.05, and the mildest at which FakeR falls under half its value
on ``original``. Points follow the order the sweep listed its values (mildest first)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.evaluation.paired import Evaluation
from transforms.sweeps import parse_sweep_name

AUC_BREAK = -0.05


@dataclass
class Breaking:
    detector: str
    # the mildest value whose AUC drift CI lies wholly below AUC_BREAK
    auc_drift_below: float | None
    # the mildest value where FakeR < half of original's
    fake_recall_halved: float | None


@dataclass
class SweepCurve:
    # e.g. spatial@scale.factor
    name: str
    values: list[float] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)

    @property
    def param(self) -> str:
        return self.name.split("@", 1)[1]


def sweeps_of(conditions: list[str]) -> list[SweepCurve]:
    """The sweeps among a run's conditions, each in the order its conditions appear."""
    curves: dict[str, SweepCurve] = {}
    for cond in conditions:
        parsed = parse_sweep_name(cond)
        if parsed:
            curve = curves.setdefault(parsed[0], SweepCurve(parsed[0]))
            curve.values.append(parsed[1])
            curve.conditions.append(cond)
    return list(curves.values())


def breaking_points(ev: Evaluation, curve: SweepCurve) -> list[Breaking]:
    out = []
    for det in ev.detectors:
        auc_break = fr_half = None
        base = ev.cell(det, "original").fake_recall if "original" in ev.conditions else float("nan")
        for value, cond in zip(curve.values, curve.conditions, strict=True):
            cell = ev.cell(det, cond)
            if auc_break is None and cell.auc_drift_ci is not None and cell.auc_drift_ci[1] < AUC_BREAK:
                auc_break = value
            if fr_half is None and base == base and cell.fake_recall < 0.5 * base:
                fr_half = value
        out.append(Breaking(det, auc_break, fr_half))
    return out


def sweep_json(ev: Evaluation) -> list[dict]:
    """The sweeps' curves and breaking points, as report.json holds them."""
    out = []
    for curve in sweeps_of(ev.conditions):
        points = []
        for det in ev.detectors:
            for value, cond in zip(curve.values, curve.conditions, strict=True):
                c = ev.cell(det, cond)
                points.append(
                    {
                        "detector": det,
                        "value": value,
                        "condition": cond,
                        "auc": c.auc,
                        "auc_ci": c.auc_ci,
                        "auc_drift": c.auc_drift,
                        "auc_drift_ci": c.auc_drift_ci,
                        "fake_recall": c.fake_recall,
                        "fake_recall_ci": c.fake_recall_ci,
                    }
                )
        breaks = [b.__dict__ for b in breaking_points(ev, curve)]
        out.append({"sweep": curve.name, "values": curve.values, "points": points, "breaking_points": breaks})
    return out


def _value(v: float | None) -> str:
    return "-" if v is None else f"{v:g}"


def sweep_tables(ev: Evaluation) -> list:
    """One breaking-point table per sweep."""
    from gateway.evaluation.tables import Table, TableRow

    out = []
    for curve in sweeps_of(ev.conditions):
        rows = tuple(
            TableRow((b.detector, _value(b.auc_drift_below), _value(b.fake_recall_halved)))
            for b in breaking_points(ev, curve)
        )
        note = (
            f"Values tried, mildest first: {', '.join(_value(v) for v in curve.values)}. A dash: the detector did "
            f"not break within them. AUC: the paired bootstrap interval of AUC drift vs original lies wholly below "
            f"{AUC_BREAK:+.2f}. FakeR: under half of FakeR on original, at the threshold fixed on original."
        )
        header = ("detector", f"AUC breaks at {curve.param}", f"FakeR halved at {curve.param}")
        out.append(Table(f"Breaking points of the sweep {curve.name}", header, rows, (note,)))
    return out


def sweep_figures(ev: Evaluation, folder) -> list:
    """Per sweep, AUC and FakeR of each detector against the swept value, with their bootstrap bands."""
    # the plots module chose the Agg backend
    from gateway.evaluation.plots import PERCENT, Figure, plt

    out = []
    for curve in sweeps_of(ev.conditions):
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        x = list(range(len(curve.values) + 1))
        for det in ev.detectors:
            cells = [ev.cell(det, "original")] + [ev.cell(det, c) for c in curve.conditions]
            for ax, key in zip(axes, ("auc", "fake_recall"), strict=True):
                y = [PERCENT * getattr(c, key) for c in cells]
                lo, hi = ([PERCENT * ci[k] for ci in (getattr(c, f"{key}_ci") for c in cells)] for k in (0, 1))
                ax.plot(x, y, marker="o", label=det)
                ax.fill_between(x, lo, hi, alpha=0.15)
        for ax, title in zip(axes, ("AUC (%)", "FakeR at the fixed threshold (%)"), strict=True):
            ax.set_xticks(x, ["original"] + [_value(v) for v in curve.values])
            ax.set_xlabel(curve.param)
            ax.set_title(title)
            ax.set_ylim(0, PERCENT)
        axes[0].axhline(PERCENT / 2, ls="--", c="grey", lw=0.8)
        axes[1].legend(fontsize=8)
        fig.tight_layout()
        path = folder / f"sweep_{curve.name.replace('@', '_').replace('.', '_')}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        caption = (
            f"AUC and FakeR (%) of each detector as {curve.param} of {curve.name.split('@')[0]} grows harsher "
            f"(left to right, original first), with 95% anchor-clustered bootstrap bands."
        )
        out.append(Figure(f"sweep:{curve.name}", path, caption))
    return out
