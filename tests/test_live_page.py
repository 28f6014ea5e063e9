"""The monitor's live page in a real browser: a monitor on a recorded stream (through the local broker), a real
Prometheus evaluating the shipped rules against it, and headless Chromium (Debian's ``chromium``) opening ``/``.
The page shows every (detector, condition) cell that ``/metrics`` has with the same AUC to the shown precision, a
comparison with its interval, and the alert Prometheus fires; its script swaps in a fresh ``/live`` under the
page's own Content-Security-Policy.

``LASTMILE_SCREENSHOT=docs/images/monitor-page.png pytest tests/test_live_page.py`` also writes the screenshot
that docs/monitor.md shows."""

from __future__ import annotations

import os
import re
import shutil
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from detectors.serving.processes import free_port
from gateway.monitor.config import ComparisonSettings, MonitorConfig, WindowSettings
from gateway.monitor.page import PERCENT_DIGITS
from tests.support.browser import dom, screenshot
from tests.support.monitor import computed_after, prometheus_scraping, synthetic
from tests.support.monitor import topics as _topics
from tests.support.page import by_series, cell, read
from tests.support.streaming import start_monitor, wait_for

ALERT = "LastmileFakeRecallCollapse"


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


def _shown(x: float) -> str:
    """As the page shows an AUC or a difference of AUCs: in %, as the report does."""
    return f"{100 * x:.{PERCENT_DIGITS}f}"


def test_the_page_in_chromium_shows_what_the_metrics_say_with_a_comparison_and_the_firing_alert(broker, tmp_path):
    k = _topics(broker, "page")
    synthetic(k, 80, time.time(), collapse="npr")  # labels on their topic; npr calls everything real under full
    port = free_port()
    with prometheus_scraping(tmp_path, port) as prom_port:
        cfg = MonitorConfig(
            kafka=k,
            http_port=port,
            windows=WindowSettings(compute_interval_s=0.2),
            comparisons=[ComparisonSettings(champion="d3", challenger="npr")],
            alerts_from=f"http://127.0.0.1:{prom_port}",
        )
        mon, thread = start_monitor(cfg)
        try:
            # the page lists the alert once Prometheus has it (pending or firing: its `for:` shortened to 2 s)
            wait_for(lambda: f'data-alert="{ALERT}"' in _get(port, "/live"), timeout_s=90, what="the alert on the page")
            computed_after(port, time.time())
            scraped = _get(port, "/metrics")
            shown = dom(f"http://127.0.0.1:{port}/")
            shot = screenshot(f"http://127.0.0.1:{port}/", tmp_path / "monitor-page.png")
        finally:
            mon.stop_event.set()
            thread.join(30)
    page = read(shown)
    want = {
        (lab["detector"], lab["version"], lab["condition"]): _shown(v)
        for lab, v in _series(scraped, "lastmile_auc", window="time", population="labelled")
    }
    assert len(want) == 6  # 2 detectors x 3 conditions
    got = {k: v["value"] for k, v in by_series(page, "auc").items()}
    assert got == want
    pair = {"champion": "d3", "challenger": "npr", "population": "traffic", "condition": "full"}
    lo, hi = (
        _one(scraped, f"lastmile_comparison_auc_difference_{side}", **pair, window="time")
        for side in ("lower", "upper")
    )
    assert cell(page, "auc-difference", **pair)["interval"] == f"[{_shown(lo)}, {_shown(hi)}]"
    assert ALERT in page.alerts
    # npr calls every video real under full: every score the same, an AUC interval of zero width, marked as such
    npr_full = shown.split('<td class="auc" data-detector="npr" data-version="1" data-condition="full">')[1]
    cell_html = npr_full.split("</td>")[0]
    assert '<abbr class="degenerate" title="an interval of zero width' in cell_html and cell_html.endswith("†</abbr>")
    assert 'data-refreshes="' in shown  # the page's script fetched /live and swapped it in, under the page's CSP
    # issue 64: conditions in the order of dissemination (not by name), a headline per detector, AUC in %
    for det in ("npr", "d3"):
        rows = re.findall(rf'<tr data-detector="{det}" data-version="1" data-condition="([a-z]+)">', shown)
        assert rows[:3] == ["original", "spatial", "full"], rows
    headline = re.search(
        r'<p class="headline[^"]*" data-detector="npr" data-version="1" data-condition="full">([^<]*)<', shown
    )
    assert headline and headline.group(1).startswith("Loses most under full: AUC -"), shown[:3000]
    assert "points [" in headline.group(1) and "(the whole interval below 0)" in headline.group(1)
    assert "AUC %" in shown and "Kolmogorov-Smirnov" in shown  # each column says what it is
    if target := os.environ.get("LASTMILE_SCREENSHOT"):
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, target)


def _series(text: str, name: str, **where: str) -> list[tuple[dict[str, str], float]]:
    """The samples of ``name`` in a /metrics text that match ``where`` (prometheus_client's own parser)."""
    return [
        (s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in where.items())
    ]


def _one(text: str, name: str, **where: str) -> float:
    (hit,) = _series(text, name, **where)
    return hit[1]
