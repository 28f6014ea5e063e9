"""Building blocks of the dashboards, on Grafana's own SDK (``grafana-foundation-sdk``, which types every panel,
query and variable of Grafana's dashboard model): a query variable, a time-series panel, a dashboard.

The dashboards were written as hand-built JSON before; ``tests/test_dashboards_sdk.py`` checks that what the SDK
emits has the same panels, queries, legends, units, ranges, positions and variables as that JSON (kept in
``tests/data/grafana-hand-built/``), and that the JSON loads back into the SDK's model. Every panel the
dashboards need is one the SDK expresses: nothing is kept by hand.
"""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders import common, prometheus, timeseries
from grafana_foundation_sdk.builders import dashboard as board
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as model
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    GridPos,
    VariableOption,
    VariableRefresh,
    VariableSort,
)

DS = DataSourceRef(type_val="prometheus", uid="${datasource}")  # the Prometheus chosen in the datasource variable
REFRESH = "30s"
TIME = ("now-6h", "now")


def variable(name: str, query: str, multi: bool = True) -> board.QueryVariable:
    """A query variable over Prometheus label values, refreshed with the time range, "All" by default (``.*``)."""
    return (
        board.QueryVariable(name)
        .label(name)
        .datasource(DS)
        .query(query)
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .include_all(True)
        .multi(multi)
        .all_value(".*")
        .current(VariableOption(selected=True, text="All", value="$__all"))
        .sort(VariableSort.ALPHABETICAL_ASC)
    )


def panel(
    pid: int,
    title: str,
    targets: list[tuple[str, str]],
    x: int,
    y: int,
    w: int = 12,
    h: int = 8,
    unit: str = "percentunit",
    minmax: tuple | None = (0, 1),
) -> timeseries.Panel:
    """A time-series panel of PromQL ``targets`` ((expression, legend) pairs), its legend a table on the right
    with each series' latest value."""
    legend = (
        common.VizLegendOptions()
        .display_mode(model.LegendDisplayMode.TABLE)
        .placement(model.LegendPlacement.RIGHT)
        .calcs(["lastNotNull"])
        .show_legend(True)
    )
    out = timeseries.Panel().id(pid).title(title).datasource(DS).grid_pos(GridPos(h=h, w=w, x=x, y=y))
    out = out.unit(unit).legend(legend)
    if minmax:
        out = out.min(minmax[0]).max(minmax[1])
    for i, (expr, text) in enumerate(targets):
        out = out.with_target(prometheus.Dataquery().ref_id(chr(65 + i)).expr(expr).legend_format(text).datasource(DS))
    return out


def repeated(p: timeseries.Panel, by: str) -> timeseries.Panel:
    """``p`` repeated for each value of the variable ``by``, one under another."""
    return p.repeat(by).repeat_direction("v")


def dashboard(
    uid: str, title: str, panels: list[timeseries.Panel], variables: list[board.QueryVariable], tags: list[str]
) -> dict:
    """The dashboard as Grafana's JSON model (what the SDK's encoder writes), a datasource variable first."""
    out = (
        board.Dashboard(title)
        .uid(uid)
        .tags(tags)
        .editable()
        .timezone("browser")
        .refresh(REFRESH)
        .time(*TIME)
        .with_variable(board.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
    )
    for v in variables:
        out = out.with_variable(v)
    for p in panels:
        out = out.with_panel(p)
    return json.loads(JSONEncoder().encode(out.build()))
