"""A real Prometheus server with the shipped rules scrapes a monitor comparing a champion with two challengers
(issue 25): LastmileChallengerLessRobust fires for the one whose AUC drops under full by far more than the
champion's, and stays silent for the one that drifts like the champion."""

from __future__ import annotations

import time

import numpy as np

from gateway.monitor.config import ComparisonSettings, MonitorConfig
from gateway.monitor.service import Monitor
from tests.support.monitor import _prom, event, prometheus_scraping
from tests.support.streaming import wait_for

SHIFTS = {"npr": (2.0, 1.6), "worse": (2.0, 0.2), "alike": (2.0, 1.6)}  # (original, full) separation


def _monitor() -> Monitor:
    comparisons = [ComparisonSettings(champion="npr", challenger=c, margin=-0.05, min_samples=50)
                   for c in ("worse", "alike")]  # fmt: skip
    mon = Monitor(MonitorConfig(http_port=0, comparisons=comparisons))
    rng, now = np.random.default_rng(4), time.time()
    for i in range(300):
        y = i % 2 == 1
        base = rng.normal()
        for det, shifts in SHIFTS.items():
            for cond, shift in zip(("original", "full"), shifts, strict=True):
                score = float(base + shift * y + rng.normal(0, 0.5))
                ev = event(f"v{i}", cond, score, now, det, label="generated" if y else "real", thr=1.0)
                mon.store.add_score(ev, now)
    mon.caught_up.set()
    mon.metrics.caught_up.set(1)
    return mon


def test_prometheus_raises_the_challenger_alert_only_for_the_less_robust_challenger(tmp_path):
    mon = _monitor()
    port = mon.start_http()
    with prometheus_scraping(tmp_path, port) as prom_port:

        def firing():
            try:
                alerts = _prom(prom_port, "/api/v1/alerts")["data"]["alerts"]
            except OSError:
                return None
            mine = [a for a in alerts if a["labels"]["alertname"] == "LastmileChallengerLessRobust"]
            return mine if any(a["state"] == "firing" for a in mine) else None

        alerts = wait_for(firing, timeout_s=90, what="the challenger alert firing")
        assert {(a["labels"]["challenger"], a["labels"]["condition"]) for a in alerts} == {("worse", "full")}
        query = (
            "/api/v1/query?query="
            "champion_challenger_population_condition:lastmile_comparison_robustness_difference_upper:time"
        )
        upper = {r["metric"]["challenger"]: float(r["value"][1]) for r in _prom(prom_port, query)["data"]["result"]}
        assert upper["worse"] < -0.05 < upper["alike"]  # the silent one is within the margin, and was scraped
    mon.http.close()
