"""The stack's clients say where their settings came from, and every option says what it does (unit: in-process,
through click's runner, refused before any broker is asked).

A new user's ``lastmile send clips/a.mp4`` from a folder without ``lastmile-up/`` said the file "lies outside the
folders the gateway reads (none configured)": the real cause, that no stack config was found and the defaults
were used, was said nowhere."""

from __future__ import annotations

import json
from pathlib import Path

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
    assert "using the defaults (broker 127.0.0.1:1, no folder the gateway reads files from)" in result.stderr
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


# -- a replay's manifest: its files checked before any work -----------------------------------------------------------
def _manifest(folder, uris: dict[str, str]) -> None:
    rows = [{"video_id": v, "uri": u, "label": "real", "source": "real", "anchor_id": v} for v, u in uris.items()]
    (folder / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_replay_of_a_manifest_naming_missing_files_exits_2_before_scoring_naming_each(folder):
    (folder / "sub").mkdir()
    _manifest(folder, {"a": "a.mp4", "typo": "a.mpp4", "dir": "sub", "gone": (folder / "gone.mp4").as_uri(),
                       "web": "https://cdn.example.com/v.mp4"})  # fmt: skip
    result = CliRunner().invoke(cli, ["replay", "m.jsonl", "--out", "run"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == "Error: m.jsonl: 4 of 5 videos name a file that cannot be read or a URL off the allow-list; " \
                       "nothing was scored (--allow-missing runs the others):"  # fmt: skip
    assert lines[1:] == [
        f"  video typo: a.mpp4: no such file ({folder / 'a.mpp4'})",
        f"  video dir: sub: not a regular file ({folder / 'sub'})",
        f"  video gone: {(folder / 'gone.mp4').as_uri()}: no such file ({folder / 'gone.mp4'})",
        "  video web: https://cdn.example.com/v.mp4: host 'cdn.example.com' is not in the allow-list "
        "(--http-allow-host)",
    ]  # the URL is checked as written, not fetched (issue 64: it used to fail per video, after the run began)
    assert not (folder / "run").exists()


def test_a_url_on_the_allow_list_passes_the_check_and_one_on_another_port_is_named(folder, monkeypatch):
    from gateway.batch import replay

    _manifest(folder, {"a": "a.mp4", "web": "https://cdn.example.com/v.mp4", "admin": "http://cdn.example.com:8080/x"})
    started = []
    monkeypatch.setattr(replay, "replay", lambda cfg, out, **kw: started.append(out) or out / "results.parquet")
    args = ["replay", "m.jsonl", "--out", "run", "--http-allow-host", "cdn.example.com"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and started == [] and not (folder / "run").exists()
    assert result.stderr.splitlines()[1:] == [
        "  video admin: http://cdn.example.com:8080/x: port 8080 of host 'cdn.example.com' is not in the allow-list "
        "(listed: 80, 443; an entry without a port allows 80 and 443; write 'cdn.example.com:8080' to allow this "
        "one) (--http-allow-host)"
    ]
    result = CliRunner().invoke(cli, [*args, "--http-allow-host", "cdn.example.com:8080"])
    assert started == [Path("run")], result.output  # every row past the check, to the run (stood in for)


def test_an_object_under_an_object_store_prefix_passes_the_check_and_one_outside_is_named(folder, monkeypatch):
    from gateway.batch import replay

    _manifest(folder, {"a": "a.mp4", "s3": "s3://uploads/videos/v.mp4", "other": "az://media/raw/v.mp4"})
    started = []
    monkeypatch.setattr(replay, "replay", lambda cfg, out, **kw: started.append(cfg) or out / "results.parquet")
    args = ["replay", "m.jsonl", "--out", "run", "--object-store", "s3://uploads/videos/"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and started == [] and not (folder / "run").exists()
    assert result.stderr.splitlines()[1:] == [
        "  video other: az://media/raw/v.mp4: container 'media', key 'raw/v.mp4': outside sources.object_stores "
        "(s3://uploads/videos/) (--object-store)"
    ]
    result = CliRunner().invoke(cli, [*args, "--object-store", "az://media"])
    assert len(started) == 1, result.output
    assert started[0].fetch_rules().sources.object_stores == ["s3://uploads/videos/", "az://media/"]


def test_allow_missing_runs_a_manifest_known_to_be_partial(folder, monkeypatch):
    from gateway.batch import replay

    _manifest(folder, {"a": "a.mp4", "typo": "a.mpp4"})
    started = []
    monkeypatch.setattr(replay, "replay", lambda cfg, out, **kw: started.append(out) or out / "results.parquet")
    result = CliRunner().invoke(cli, ["replay", "m.jsonl", "--out", "run", "--allow-missing"])
    assert started == [Path("run")], result.output  # past the check, to the run (stood in for: no scoring here)


def test_many_missing_files_are_named_twenty_then_counted(folder):
    _manifest(folder, {f"v{i}": f"v{i}.mp4" for i in range(25)})
    result = CliRunner().invoke(cli, ["replay", "m.jsonl", "--out", "run"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[1:] == [
        f"  video v{i}: v{i}.mp4: no such file ({folder / f'v{i}.mp4'})" for i in range(20)
    ] + ["  ... and 5 more"]


# -- verdicts that go one way ----------------------------------------------------------------------------------------
def test_scores_warns_of_a_detector_whose_verdicts_go_one_way_naming_the_labelled_videos_it_got_wrong():
    """On the bundled clips npr called every clip generated, the real ones included, and the tap said nothing."""
    from gateway.client.follow import Table, one_way
    from tests.support.monitor import NOW, event

    table = Table()
    for i in range(12):
        label = "real" if i < 2 else "generated"
        for cond in ("original", "full"):
            table.note_event(event(f"v{i}", cond, 8.0, NOW, "npr", label))  # every verdict generated
            table.note_event(event(f"v{i}", cond, 1.0 if i % 2 else -1.0, NOW, "d3", label))  # half and half
            table.note_event(event(f"v{i}", cond, -3.0 if i else 3.0, NOW, "spectral", label))  # 22 of 24 real
    assert one_way(table) == [
        "npr called 24 of its 24 verdicts generated (100%, 4 of them on videos labelled real): its threshold may not "
        "fit these videos; calibrate it on a labelled replay of your own (lastmile detectors calibrate RUN)",
        "spectral called 22 of its 24 verdicts real (92%, 20 of them on videos labelled generated): its threshold may "
        "not fit these videos; calibrate it on a labelled replay of your own (lastmile detectors calibrate RUN)",
    ]
    few = Table()
    for i in range(4):  # four real videos, all called real: too few verdicts to say anything
        few.note_event(event(f"w{i}", "original", -1.0, NOW, "npr", "real"))
    assert one_way(few) == []


def test_a_manifest_file_outside_the_folders_the_replay_reads_is_refused_before_scoring(folder, tmp_path_factory):
    """It existed, so it passed a check of existence only, then became a SourceError row per video and the replay
    exited 0: the check applies the read's own rule (the manifest's folder and --file-root, symlinks followed)."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "v.mp4").write_bytes(b"x")
    (folder / "link.mp4").symlink_to(elsewhere / "v.mp4")
    _manifest(folder, {"abs": str(elsewhere / "v.mp4"), "up": f"../{elsewhere.name}/v.mp4", "link": "link.mp4"})
    result = CliRunner().invoke(cli, ["replay", "m.jsonl", "--out", "run"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()[1:]
    assert len(lines) == 3 and all("outside the folders the replay reads" in line for line in lines), lines
    assert "/etc" not in result.stderr and "no such file" not in result.stderr
    from gateway.batch import replay

    started = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(replay, "replay", lambda cfg, out, **kw: started.append(out) or out / "results.parquet")
        CliRunner().invoke(cli, ["replay", "m.jsonl", "--out", "run", "--file-root", str(elsewhere)])
    assert started == [Path("run")]  # --file-root adds the folder: past the check
