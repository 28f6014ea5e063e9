"""`lastmile demo` end to end (small): corpus, replay of all six conditions, report with the proxy notice."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser


class _Page(HTMLParser):
    """The text a reader sees (outside <style>), and each figure's image and caption."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.figures: list[dict] = []
        self._tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self._tags.append(tag)
        if tag == "figure":
            self.figures.append({"img": None, "caption": ""})
        elif tag == "img" and self.figures:
            self.figures[-1]["img"] = dict(attrs)["src"]

    def handle_endtag(self, tag):
        while self._tags and self._tags.pop() != tag:
            pass

    def handle_data(self, data):
        if "style" in self._tags:
            return
        self.text.append(data)
        if "figcaption" in self._tags:
            self.figures[-1]["caption"] += data


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
    page = _Page()
    page.feed(html)
    text = "".join(page.text)
    # rendered from the same table objects as report.md: no raw Markdown markers reach the reader
    assert "**" not in text and "|---" not in text and "`" not in text and not re.search(r"^\s*(#|>)", text, re.M)
    assert text.count(report["notice"]) == 1  # the proxy banner once, as a banner
    assert len(page.figures) == 5
    for fig in page.figures:  # a human caption under each plot, not its key
        assert fig["img"].startswith("data:image/png;base64,")
        assert len(fig["caption"].split()) >= 8 and fig["caption"].strip() not in {
            "auc",
            "recall",
            "roc",
            "heatmap",
            "rank",
        }
    assert "<td><strong>mean</strong></td>" in html and "<th>detector</th>" in html
    md = (out / "run" / "report.md").read_text()
    assert "seed 4242" in md and "3 real anchors, 18 videos" in md
    # 3 real videos per source cannot resolve T@1% or T@5%: the report says so, in both renderings
    assert "Not resolved by this sample" in text and "Not resolved by this sample" in md
    assert all(c["fake_recall_drift_ci"] is not None and "undefined_replicates" in c for c in report["cells"])
