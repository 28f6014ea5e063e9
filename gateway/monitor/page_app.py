"""The monitor's live page served: ``/`` (the whole page), ``/live`` (the part the page's script fetches every
few seconds and swaps in, the same query kept) and ``/static/...`` (its own script and style, read once from the
package). Rendered by jinja2 templates (``templates/``) with autoescape on: every name in the page came from a
record or a query. What the page shows: :mod:`gateway.monitor.page`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from urllib.parse import parse_qs

import jinja2
from prometheus_client import CollectorRegistry

from gateway.monitor.alerts import AlertSource
from gateway.monitor.page import Comparison, ConditionMetrics, Estimate, Page, build
from gateway.toolkit.http import Pages, StartResponse

# characters of a query string read
MAX_QUERY = 200


# -- drawing: where an interval's marks go on a cell's small SVG --------------------------------------------------
@dataclass(frozen=True)
class Bar:
    """An interval drawn on a scale: x positions (0 to ``width``) of the lower and upper bound and the value."""

    lo: float
    hi: float
    at: float
    width: int
    # where 0 lies, on a scale around it
    zero: float | None = None
    # where a threshold (a comparison's margin) lies
    mark: float | None = None


def auc_bar(row: ConditionMetrics, width: int = 120) -> Bar | None:
    """A row's AUC interval on a 0-1 scale."""
    e = row.auc
    if e is None or not e.drawable:
        return None
    return Bar(e.lower * width, e.upper * width, e.value * width, width)


def forest_bar(c: Comparison, e: Estimate | None, margin: bool = False, width: int = 150) -> Bar | None:
    """A difference of comparison ``c`` on the comparison's own scale, symmetric around 0 (half of it: the widest
    bound or the margin, at least 0.1), with 0 and (``margin``) the alert's margin marked."""
    if e is None or not e.drawable:
        return None
    ends = [
        abs(x) for d in c.rows for v in (d.auc, d.robustness, d.flips) if v and v.drawable for x in (v.lower, v.upper)
    ]
    half = max([0.1, *ends, abs(c.margin or 0.0)])

    def x(v: float) -> float:
        return (v + half) / (2 * half) * width

    mark = x(c.margin) if margin and c.margin is not None else None
    return Bar(x(e.lower), x(e.upper), x(e.value), width, zero=x(0.0), mark=mark)


def environment() -> jinja2.Environment:
    """The page's templates (``templates/``), HTML autoescaped, every name a template uses defined."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gateway.monitor", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.globals.update(auc_bar=auc_bar, forest_bar=forest_bar)
    return env


def render(page: Page, whole: bool = True) -> str:
    """The page as HTML: the whole document, or (``whole=False``) the part ``/live`` serves."""
    name = "page.html.j2" if whole else "live.html.j2"
    return _ENV.get_template(name).render(page=page)


_ENV = environment()
# the page's own files, read once from the package: nothing is fetched from elsewhere
STATIC = {
    f"/static/{name}": (resources.files("gateway.monitor").joinpath("static", name).read_bytes(), kind)
    for name, kind in (("page.css", "text/css; charset=utf-8"), ("page.js", "text/javascript; charset=utf-8"))
}
# the page runs only its own script and style, talks only to its own origin, in no frame
HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
]


def page_app(registry: CollectorRegistry, alerts: AlertSource, canary_command: str | None = None) -> Pages:
    """A WSGI app for ``/`` (the page), ``/live`` (its changing part) and ``/static/...``; None for any other
    path, so the caller answers it. ``canary_command``: what the page names where no canary has been scored."""

    def app(environ: dict, start_response: StartResponse) -> Iterable[bytes] | None:
        path = environ.get("PATH_INFO", "")
        if path in STATIC:
            body, kind = STATIC[path]
        elif path in ("/", "/live"):
            query = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")[:MAX_QUERY]).items()}
            page = build(registry, query, alerts.current(), canary_command)
            body, kind = render(page, whole=path == "/").encode(), "text/html; charset=utf-8"
        else:
            return None
        start_response("200 OK", [("Content-Type", kind), ("Content-Length", str(len(body))), *HEADERS])
        return [body]

    return app
