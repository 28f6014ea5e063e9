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
        if tag == "figure":
            self.figures.append({"img": None, "caption": ""})
        elif tag == "img" and "figure" in self._tags:  # (a flip's strip is an image outside any figure)
            self.figures[-1]["img"] = dict(attrs)["src"]
        if tag not in ("img", "br"):  # void elements: no end tag pops them
            self._tags.append(tag)

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
    # the default versions alone: a further version shipped beside one joins only with --versions
    assert {c["detector"] for c in report["cells"]} == {"npr", "spectral", "restrav_px", "d3_px"}
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
    check_flips(out / "run")


def check_flips(run_dir):
    """The report's flipped videos for npr under full: listed with the decision pair their rows say, each with a
    strip whose lower row is frames of the variant rendered again, which hashes to the row's variant_sha256."""
    import hashlib

    import numpy as np
    import pyarrow.parquet as pq
    from PIL import Image

    from gateway.batch.replay import ReplayConfig
    from gateway.evaluation.strips import compose, frame_size, frames
    from transforms.engine import Engine

    rows = pq.read_table(run_dir / "results.parquet").to_pylist()
    by = {(r["video_id"], r["condition"], r["detector"]): r for r in rows}
    listed = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "flips", str(run_dir), "--detector", "npr", "--condition", "full",
         "--limit", "0", "--json"], capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    flips = [json.loads(line) for line in listed]
    assert flips, "npr flips no video under full in the demo"
    for f in flips:
        before, after = by[(f["video_id"], "original", "npr")], by[(f["video_id"], "full", "npr")]
        assert (f["original_decision"], f["variant_decision"]) == (before["decision"], after["decision"])
        assert f["original_decision"] != f["variant_decision"]
        assert f["direction"] == ("real_to_generated" if after["decision"] else "generated_to_real")
    report = json.loads((run_dir / "report.json").read_text())
    section = next(s for s in report["flips"] if (s["detector"], s["condition"]) == ("npr", "full"))
    from gateway.ops.demo import DEMO_FLIPS

    # the demo's own, and its CLI's default, per kind of flip (issue 64: harm first; it was per direction)
    assert all(len(v) <= DEMO_FLIPS for v in section["shown_by_kind"].values())
    assert list(section["shown_by_kind"]) == ["missed_fake", "false_alarm", "correction", "unlabelled"]
    for kind, listed in section["shown_by_kind"].items():
        for x in listed:  # a missed fake: a generated video now called real; a false alarm: a real one called generated
            harm = {"missed_fake": ("generated", "generated_to_real"), "false_alarm": ("real", "real_to_generated")}
            assert x["kind"] == kind and (kind not in harm or (x["label"], x["direction"]) == harm[kind])
    assert section["kinds"]["missed_fake"] + section["kinds"]["false_alarm"] + section["kinds"]["correction"] == len(
        flips
    )
    shown = [x for d in ("real_to_generated", "generated_to_real") for x in section["shown"][d]]
    assert shown and sum(section["flipped"].values()) == len(flips)
    html = (run_dir / "report.html").read_text()
    info = json.loads((run_dir / "run.json").read_text())
    cfg = ReplayConfig.model_validate(info["config"])
    conditions, profile = cfg.resolve_conditions()
    full = next(c for c in conditions if c.name == "full")
    engine = Engine(profile.with_determinism(cfg.deterministic), cfg.limits)
    manifest = {json.loads(line)["video_id"]: json.loads(line)["uri"] for line in cfg.manifest.read_text().splitlines()}
    for x in shown:
        assert x["note"] is None and x["strip"], x
        assert f'<a href="{x["strip"]}"><img class="strip" src="{x["strip"]}"' in html
        source = (cfg.manifest.parent / manifest[x["video_id"]]).read_bytes()
        assert hashlib.sha256(source).hexdigest() == by[(x["video_id"], "full", "npr")]["input_sha256"]
        variant = engine.run(source, [full]).variants["full"].data
        assert hashlib.sha256(variant).hexdigest() == by[(x["video_id"], "full", "npr")]["variant_sha256"]
        size = frame_size(source)
        strip = np.asarray(Image.open(run_dir / x["strip"]).convert("RGB"))
        want = np.asarray(compose([frames(source, size), frames(variant, size)], ["", ""]))
        h = size[1]
        lower = slice(strip.shape[0] - h - 4, strip.shape[0] - 4)  # the variant's row, under its caption
        assert np.array_equal(strip[lower], want[lower])
    # the report's default (3 of each kind) on the demo's run: harm first, at most three each, each strip drawn
    from gateway.batch.results import read_results
    from gateway.evaluation.flips_report import KINDS, SHOWN, flip_sections

    npr = [r for r in read_results(run_dir / "results.parquet") if r.detector == "npr"]
    (section,), why = flip_sections(npr, ["original", "full"], run_dir, shown=SHOWN)
    assert SHOWN == 3 and why is None and list(section.shown) == list(KINDS)
    drawn = ("missed_fake", "false_alarm", "unlabelled")  # (corrections are counted, not drawn)
    assert all(len(v) == (min(3, section.kinds[k]) if k in drawn else 0) for k, v in section.shown.items())
    harm = section.shown["missed_fake"] + section.shown["false_alarm"]
    assert harm and all(st.path is not None for st in harm)  # (npr under full misses fakes: harm to show)


def test_demo_versions_adds_the_further_versions_and_prints_each_comparison(tmp_path):
    """Only with --versions: the augmented npr and spectral join, each compared with its default version."""
    out = tmp_path / "demo"
    cmd = [sys.executable, "-m", "gateway.cli", "demo", "--anchors", "1", "--profile", "throughput", "--flips", "0"]
    res = subprocess.run([*cmd, "--versions", "--out", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "x 6 detectors" in res.stdout
    for name in ("npr", "spectral"):
        assert f"## {name}@1.1.0-proxy1000-aug (challenger) vs {name}@1.0.0-proxy1000 (champion)" in res.stdout
    report = json.loads((out / "run" / "report.json").read_text())
    pairs = [(c["champion"], c["challenger"]) for c in report["comparisons"]]
    assert pairs == [
        ("npr@1.0.0-proxy1000", "npr@1.1.0-proxy1000-aug"),
        ("spectral@1.0.0-proxy1000", "spectral@1.1.0-proxy1000-aug"),
    ]
