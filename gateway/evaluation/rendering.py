"""The report templates' environment (``templates/``, jinja2): Markdown as written (names in its tables through
``md_cell``), HTML autoescaped, every name a template uses defined, plots embedded in the HTML as data URIs, counts
in the singular where they are 1, and a sentence's `code` spans as ``<code>`` in the HTML."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from gateway.core.wording import counted
from gateway.evaluation.tables import md_alt, md_cell

CODE_SPAN = re.compile(r"`([^`]+)`")


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
    env.filters["md_cell"] = md_cell
    env.filters["counted"] = counted
    env.filters["code_html"] = code_html
    return env


def data_uri(path: Path) -> str:
    """A PNG file as a ``data:`` URI, so report.html stands alone."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


def code_html(text: str) -> Markup:
    """``text`` escaped for HTML, its Markdown `code` spans as ``<code>`` elements (a caution names a command)."""
    return Markup(CODE_SPAN.sub(r"<code>\1</code>", str(escape(text))))
