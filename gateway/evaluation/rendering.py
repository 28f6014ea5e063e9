"""The report templates' environment (``templates/``, jinja2): Markdown as written, HTML autoescaped, every name a
template uses defined, plots embedded in the HTML as data URIs."""

from __future__ import annotations

import base64
from pathlib import Path

import jinja2

from gateway.evaluation.tables import md_alt


def environment() -> jinja2.Environment:
    """The environment every report template renders in, with the ``data_uri`` and ``md_alt`` filters."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gateway.evaluation", "templates"),
        autoescape=jinja2.select_autoescape(["html.j2"]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["data_uri"] = data_uri
    env.filters["md_alt"] = md_alt
    return env


def data_uri(path: Path) -> str:
    """A PNG file as a ``data:`` URI, so report.html stands alone."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()
