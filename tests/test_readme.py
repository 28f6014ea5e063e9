"""The README is a guide: short, its two set-up commands first, every path and link it names present in the
repository (its runnable blocks run in tests/test_installed.py, from the installed wheel)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
TOPS = "examples|docs|tests|gateway|transforms|detectors|dashboards|helm|triton_models|scripts|\\.ci"
PATH = re.compile(rf"(?<![\w/.~-])((?:{TOPS})/[\w./*@-]*[\w*])")


def test_the_readme_is_a_guide_of_at_most_about_200_lines():
    assert len(README.splitlines()) <= 200


def test_the_two_setup_commands_come_first():
    first = re.search(r"```bash\n(.*?)```", README, re.S).group(1).splitlines()
    assert first[0].split("#")[0].strip() == "pip install . && lastmile demo"
    assert first[1].split("#")[0].strip() == "bash tests/run.sh"


def test_the_two_commands_are_followed_by_one_sentence_of_their_times_then_the_guide():
    """The measurement log that sat between the commands and the first heading (15 lines) is docs/benchmarks.md's."""
    after = README.split("```", 2)[2].split("\n## ", 1)[0]
    lines = [line for line in after.splitlines() if line.strip()]
    assert len(lines) <= 2 and lines[0].startswith("Measured"), lines
    assert "docs/benchmarks.md#the-two-set-up-commands" in after
    assert "## The two set-up commands" in (ROOT / "docs" / "benchmarks.md").read_text()


def test_every_path_and_link_the_readme_names_exists():
    named = set(PATH.findall(README)) | {m for m in re.findall(r"\]\(([^)#]+)\)", README) if "://" not in m}
    assert {"examples/manifest.jsonl", "docs/tap.md", "CHANGELOG.md"} <= named
    missing = [p for p in sorted(named) if not (list(ROOT.glob(p)) if "*" in p else (ROOT / p).exists())]
    assert not missing, missing


def test_every_docs_page_link_resolves():
    for page in (ROOT / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), (page.name, target)


def _auc_table(text: str) -> dict[str, list[float]]:
    """The first demo table of a page: each detector's AUC points per condition (intervals and drifts dropped)."""
    block = text[text.index("| detector | original") :].split("\n\n")[0].splitlines()[2:]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in block if not line.startswith("| **")]
    return {row[0]: [float(c.split()[0]) for c in row[1:]] for row in cells}


def test_what_the_benchmarks_page_says_of_the_readme_table_holds():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    words = (r"README's table.*?by at most ([\d.]+) AUC points in a cell \((\w+) under (\w+); (\d+) of its (\d+) "
             r"cells within (\d+)\)")  # fmt: skip
    said = re.search(words.replace(" ", r"\s+"), page, re.S)
    readme, bench = _auc_table(README), _auc_table(page)
    conditions = README[README.index("| detector | original") :].splitlines()[0].strip("|").split("|")[1:]
    gaps = {(d, c.strip()): abs(a - b) for d in readme for c, a, b in zip(conditions, readme[d], bench[d], strict=True)}
    worst = max(gaps, key=gaps.get)
    assert said and float(said.group(1)) == round(gaps[worst], 1) and worst == (said.group(2), said.group(3))
    assert int(said.group(4)) == sum(g <= float(said.group(6)) for g in gaps.values()) and int(said.group(5)) == 24


def _drifts(text: str) -> dict[str, list[float]]:
    """The first demo table of a page: each detector's AUC drift from original per condition, in points."""
    block = text[text.index("| detector | original") :].split("\n\n")[0].splitlines()[2:]
    rows = [line for line in block if not line.startswith("| **")]
    drift = re.compile(r"\(([+-][\d.]+)\)")
    return {line.strip("|").split("|")[0].strip(): [float(d) for d in drift.findall(line)] for line in rows}


@pytest.mark.parametrize("page", ["README.md", "docs/benchmarks.md"])
def test_the_drifts_each_page_states_are_its_tables(page):
    """'npr and spectral lose A-B AUC points', 'd3_px gains': held to the page's own table."""
    text = (ROOT / page).read_text()
    said = re.search(r"\(`npr`, `spectral`\) lose (\d+)-(\d+) AUC\s+points", text)
    drifts = _drifts(text)
    lost = [-d for name in ("npr", "spectral") for d in drifts[name]]
    assert said and (int(said.group(1)), int(said.group(2))) == (round(min(lost)), round(max(lost)))
    spatial, temporal, full = (drifts["d3_px"][i] for i in (1, 2, 4))  # drifts: transcode, spatial, ..., full
    assert min(spatial, temporal, full) > 0  # "the temporal d3_px gains"
