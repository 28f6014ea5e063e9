"""The stack's clients say where their settings came from, and every option says what it does (unit: in-process,
through click's runner, refused before any broker is asked).

A new user's ``lastmile send clips/a.mp4`` from a folder without ``lastmile-up/`` said the file "lies outside the
folders the gateway reads (none configured)": the real cause, that no stack config was found and the defaults
were used, was said nowhere."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from gateway.cli.app import main as cli
from gateway.cli.tap import display


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.mp4").write_bytes(b"never read: refused before it is sent")
    return tmp_path


def test_send_without_a_stack_config_says_none_was_found_and_what_that_means(folder):
    result = CliRunner().invoke(cli, ["send", "a.mp4", "--bootstrap", "127.0.0.1:1"])
    assert result.exit_code == 1
    assert f"send: note: no --config given and no lastmile-up/gateway.yaml here ({folder})" in result.stderr
    assert "using the defaults (broker localhost:9092, no folder the gateway reads files from)" in result.stderr
    assert "no stack config was found (no --config, no lastmile-up/gateway.yaml here)" in result.stderr


def test_send_and_scores_name_the_stack_config_they_read(folder):
    up = folder / "lastmile-up"
    up.mkdir()
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir()
    (up / "gateway.yaml").write_text(f"kafka:\n  bootstrap: 127.0.0.1:1\nsources:\n  file_roots: ['{elsewhere}']\n")
    result = CliRunner().invoke(cli, ["send", "a.mp4"])
    assert result.exit_code == 1
    assert "send: note: using lastmile-up/gateway.yaml, the stack's config written by lastmile up" in result.stderr
    assert f"lies outside the folders the gateway reads ({elsewhere})" in result.stderr  # its roots, not the defaults
    assert "send it with --inline, or start `lastmile up` in a folder above it" in result.stderr


@pytest.mark.parametrize(
    ("follow", "tty", "as_json", "mode"),
    [
        (False, True, False, "table"),  # on a terminal, not following: one table, the screen left as it was
        (False, False, False, "table"),
        (True, True, False, "live"),  # the only mode that clears the screen
        (True, False, False, "lines"),
        (True, True, True, "json"),
        (False, True, True, "json"),
    ],
)
def test_scores_clears_the_screen_only_when_following_on_a_terminal(follow, tty, as_json, mode):
    assert display(follow, tty, as_json) == mode


def _commands(command: click.Command, path: tuple[str, ...]):
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            yield from _commands(command.get_command(click.Context(command), name), (*path, name))
    else:
        yield path, command


def test_every_option_of_every_command_has_help_text():
    commands = list(_commands(cli, ("lastmile",)))
    assert len(commands) > 20  # the whole tree was walked, groups' commands too
    missing = [
        f"{' '.join(path)} {option.opts[0]}"
        for path, command in commands
        for option in command.params
        if isinstance(option, click.Option) and not (option.help or "").strip()
    ]
    assert missing == []
