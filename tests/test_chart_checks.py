"""The Kubernetes checks of checkov on the rendered chart (docs/deployment.md, "Kubernetes checks (checkov)"): each
rendering fails only the checks that page's table names for it, each with its reason, and every check it names
still fails there (the table is the whole skip list, kept honest both ways).

checkov runs as a subprocess from its own virtualenv (`.cache/checkov`, which tests/run.sh makes: it pins many
packages of its own), once per rendering over a folder of the rendered files; the two runs go at once, about 3 s."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.deploy import CHART, ROOT, _helm
from tests.support.tools import IN_CI

DOC = ROOT / "docs" / "deployment.md"
VENV_CHECKOV = ROOT / ".cache" / "checkov" / "bin" / "checkov"
RENDERINGS = {"default": {}, "all-on": yaml.safe_load((CHART / "ci" / "all-on-values.yaml").read_text())}
ROW = re.compile(r"^\|\s*`(CKV2?_K8S_\d+)`([^|]*)\|([^|]*)\|([^|]*)\|\s*$")


def _skip_table() -> dict[str, tuple[set[str], str]]:
    """The checks docs/deployment.md's checkov section lets fail: id -> (renderings, reason)."""
    text = DOC.read_text()
    section = text[text.index("### Kubernetes checks (checkov)") :]
    section = section[: section.index("\n## ")]
    rows = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            check, _title, where, reason = (g.strip() for g in match.groups())
            assert check not in rows, f"{check} is listed twice"
            rows[check] = ({w.strip() for w in where.split(",")}, reason)
    return rows


def _checkov() -> str:
    if VENV_CHECKOV.is_file():
        return str(VENV_CHECKOV)
    found = shutil.which("checkov")
    if found:
        return found
    if IN_CI:
        pytest.fail("checkov is required in CI: tests/run.sh installs it in .cache/checkov")
    pytest.skip("checkov not installed (tests/run.sh installs it in .cache/checkov, or put one on PATH)")


def _render(values: dict, folder: Path) -> int:
    """Writes the release's manifests (as `helm template --output-dir` would) into ``folder``; their count."""
    chart = _helm().Chart.load(str(CHART))
    chart.validate_schema(values)
    out = chart.render(values, name="lm", namespace="lastmile")
    count = 0
    for path, text in out.items():
        if path.endswith("NOTES.txt"):
            continue
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        count += sum(1 for doc in yaml.safe_load_all(text) if doc)
    return count


def test_the_skip_table_names_each_check_once_with_renderings_and_a_reason():
    rows = _skip_table()
    assert rows, "docs/deployment.md lists no checkov check (the test would read nothing)"
    for check, (where, reason) in rows.items():
        assert where and where <= RENDERINGS.keys(), (check, where)
        assert len(reason.split()) >= 8, f"{check}: say why it is not fixed"


def test_checkov_fails_only_the_checks_the_docs_name(tmp_path):
    checkov = _checkov()
    allowed = _skip_table()
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "true"}  # nothing fetched
    runs, objects = {}, {}
    for name, values in RENDERINGS.items():
        folder = tmp_path / name
        objects[name] = _render(values, folder)
        command = [checkov, "-d", str(folder), "--framework", "kubernetes", "--skip-download", "-o", "json", "--quiet"]
        runs[name] = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    problems = []
    for name, run in runs.items():
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode in (0, 1), f"checkov on {name}: exit {run.returncode}\n{stderr[-2000:]}"
        report = json.loads(stdout)
        assert isinstance(report, dict) and report.get("check_type") == "kubernetes", stdout[:500]
        summary = report["summary"]
        assert summary["parsing_errors"] == 0 and summary["passed"] > 0, (name, summary)
        # every object scanned (checkov counts a Pod per workload besides, for its graph checks)
        assert summary["resource_count"] >= objects[name], (name, summary, objects[name])
        failed: dict[str, set[str]] = {}
        for result in report["results"].get("failed_checks", []):
            failed.setdefault(result["check_id"], set()).add(f"{result['resource']} ({result['check_name']})")
        may = {check for check, (where, _reason) in allowed.items() if name in where}
        for check in sorted(failed.keys() - may):
            problems.append(
                f"{name}: {check} fails on {sorted(failed[check])}: fix the chart, or list it with a reason"
            )
        for check in sorted(may - failed.keys()):
            problems.append(f"{name}: {check} is listed in docs/deployment.md but passes: take it off the list")
    assert not problems, "\n".join(problems)
