"""Reads the monitor's live page back: each table cell that carries ``data-*`` attributes, by its class and those
attributes, with its value and interval as the page shows them (and ``marked`` where it marks a zero-width interval);
and the alerts it lists."""

from __future__ import annotations

from html.parser import HTMLParser


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, str]] = {}
        self.alerts: list[str] = []
        self._cell: dict[str, str] | None = None
        self._span: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        data = tuple(sorted((k[5:], v) for k, v in a.items() if k.startswith("data-")))
        if tag == "td" and data:
            self._cell = {"value": "", "interval": ""}
            self.cells[(a.get("class", "").split()[0], data)] = self._cell
        elif tag == "span" and self._cell is not None:
            self._span = a.get("class")
        elif tag == "abbr" and self._cell is not None and "degenerate" in a.get("class", "").split():
            self._cell["marked"] = "zero width"  # (a key of the marked cells only)
        elif tag == "li" and "data-alert" in a:
            self.alerts.append(a["data-alert"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        elif tag == "span":
            self._span = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None and self._span in ("value", "interval"):
            self._cell[self._span] += data


def read(html: str) -> _Cells:
    parser = _Cells()
    parser.feed(html)
    return parser


def cell(page: _Cells, cls: str, **data: str) -> dict[str, str]:
    return page.cells[(cls, tuple(sorted(data.items())))]


def of_class(page: _Cells, cls: str) -> dict[tuple[tuple[str, str], ...], dict[str, str]]:
    return {data: v for (c, data), v in page.cells.items() if c == cls}


def by_series(page: _Cells, cls: str) -> dict[tuple[str, str, str], dict[str, str]]:
    """The cells of ``cls`` by (detector, version, condition)."""
    return {
        (d["detector"], d["version"], d["condition"]): v
        for d, v in ((dict(k), v) for k, v in of_class(page, cls).items())
    }
