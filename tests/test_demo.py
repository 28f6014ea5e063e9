"""`lastmile demo` end to end (small): corpus, replay of all six conditions, report with the proxy notice."""

from __future__ import annotations

import json
import subprocess
import sys


def test_demo_writes_a_report_with_the_main_table(tmp_path):
    out = tmp_path / "demo"
    res = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "demo", "--anchors", "3", "--profile", "throughput", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "not AI-generated video" in res.stdout and "| npr |" in res.stdout and "report.html" in res.stdout
    report = json.loads((out / "run" / "report.json").read_text())
    assert report["notice"] and report["context"]["anchors"] == 3 and report["context"]["videos"] == 18
    conditions = {c["condition"] for c in report["cells"]}
    assert conditions == {"original", "transcode", "spatial", "temporal", "presentation", "full"}
    html = (out / "run" / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5 and "proxy" in html
    md = (out / "run" / "report.md").read_text()
    assert "seed 4242" in md and "3 real anchors, 18 videos" in md
