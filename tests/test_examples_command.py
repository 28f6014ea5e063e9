"""``lastmile examples`` (unit: in-process, click's runner): the examples a pip-only user has no other way to get,
written out of the package into a folder of theirs, byte for byte; never over files already there unless asked."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from detectors.manifest import read_manifest
from gateway.cli.app import main as cli

ROOT = Path(__file__).resolve().parent.parent


def _shipped() -> list[str]:
    root = ROOT / "examples"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_examples_writes_every_example_file_into_the_folder_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["examples", "ex"])
    assert result.exit_code == 0, result.output
    written = sorted(str(p.relative_to(tmp_path / "ex")) for p in (tmp_path / "ex").rglob("*") if p.is_file())
    assert written == _shipped() and "manifest.jsonl" in written
    assert all((tmp_path / "ex" / f).read_bytes() == (ROOT / "examples" / f).read_bytes() for f in written)
    rows = read_manifest(tmp_path / "ex" / "manifest.jsonl")
    assert all((tmp_path / "ex" / r.uri).is_file() for r in rows)  # the manifest's clips came with it
    assert f"wrote {len(written)} files to ex/:" in result.output
    assert "a proxy for AI-generated video, not AI-generated video" in result.output  # the corpus says what it is
    assert "Next: lastmile replay ex/manifest.jsonl" in result.output


def test_examples_default_to_the_folder_the_readme_names_and_never_overwrite_unasked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(cli, ["examples"]).exit_code == 0
    mine = tmp_path / "examples" / "manifest.jsonl"
    mine.write_text("edited by the user\n")
    (tmp_path / "examples" / "notes.txt").write_text("the user's own")
    again = CliRunner().invoke(cli, ["examples"])
    assert again.exit_code == 1 and "pass --force to overwrite them, or name another folder" in again.output
    assert mine.read_text() == "edited by the user\n"
    forced = CliRunner().invoke(cli, ["examples", "--force"])
    assert forced.exit_code == 0, forced.output
    assert mine.read_bytes() == (ROOT / "examples" / "manifest.jsonl").read_bytes()
    assert (tmp_path / "examples" / "notes.txt").read_text() == "the user's own"  # not ours: left alone


def test_examples_refuse_to_write_over_the_folder_they_are_read_from(monkeypatch):
    monkeypatch.chdir(ROOT)  # a source checkout's root: ./examples is the source itself
    result = CliRunner().invoke(cli, ["examples", "--force"])
    assert result.exit_code == 1 and "is where the examples are read from: name another folder" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # one line, no traceback
