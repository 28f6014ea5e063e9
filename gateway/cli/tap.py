"""Clients of a running gateway: ``lastmile send`` (videos in), ``lastmile scores`` (score events out) and
``lastmile canary`` (labelled videos in, over and over)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Literal

import click

from gateway.cli.errors import LastmileGroup, notify
from gateway.cli.logs import configure_logging
from gateway.cli.options import BOOTSTRAP, UP_CONFIG_HELP, UP_DIR, config_option, gateway_config, stack_config
from gateway.cli.signals import stop_on_signal
from gateway.client.follow import follow, one_way, row_line
from gateway.client.send import Advice, FileDigests, Sender, SendError, expand
from gateway.monitor.canary import CanaryError, CanaryFeed, parse_rate

CLEAR_SCREEN = "\x1b[H\x1b[2J"  # cursor home, clear: the live table is redrawn in place


NO_CONFIG_ADVICE = Advice(
    outside_roots=f"no stack config was found (no --config, no {UP_DIR}/gateway.yaml here), and the defaults read "
    "no folder: run this in the folder where `lastmile up` runs, pass --config, or send it with --inline"
)

NO_SHA256 = click.option(
    "--no-sha256",
    "no_sha256",
    is_flag=True,
    help="leave the videos' sha256 out of their events, for gateways from before 2026-12-04 (which refuse the key); "
    "those then do not check the bytes they read (a manifest row whose file changed is still refused here)",
)


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--inline", is_flag=True, help="send the bytes in the message instead of a file:// reference")
@click.option("--label", type=click.Choice(["real", "generated"]), default=None, help="for files and folders")
@NO_SHA256
@config_option(UP_CONFIG_HELP)
@BOOTSTRAP
def send(paths, inline, label, no_sha256, config_path, bootstrap) -> None:
    """Put videos (files, folders, JSONL manifests, s3:// and az:// objects) on the input topic."""
    cfg, from_file = stack_config("send", config_path, bootstrap)
    advice = Advice() if from_file else NO_CONFIG_ADVICE
    notes: list[str] = []
    try:
        try:
            items = expand(paths, label, notes)
        finally:  # (also when a later argument fails: what was read of the earlier ones is said)
            notify("send", notes)
        n = Sender(cfg, inline=inline, advice=advice, digests=not no_sha256).send(items, progress=sys.stderr.isatty())
    except SendError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{n} video{'' if n == 1 else 's'} sent to {cfg.kafka.input_topic} at {cfg.kafka.bootstrap}")


@click.command()
@click.option("--follow", "keep_following", is_flag=True, help="keep reading new events until Ctrl-C")
@click.option("--json", "as_json", is_flag=True, help="JSON lines: one per score event or dead letter")
@click.option("--video-id", "video_ids", multiple=True, help="only these videos")
@config_option(UP_CONFIG_HELP)
@BOOTSTRAP
def scores(keep_following, as_json, video_ids, config_path, bootstrap) -> None:
    """Show the score events and dead letters: per video, one line per condition and detector's verdict."""
    cfg, _ = stack_config("scores", config_path, bootstrap)
    mode = display(keep_following, sys.stdout.isatty(), as_json)
    news = []

    def emit(record, table) -> None:
        if record is None:
            if mode == "live" and news:
                warnings = "".join(f"\nwarning: {w}" for w in one_way(table))
                click.echo(CLEAR_SCREEN + table.render() + warnings)  # redraw the table in place, when it changed
                news.clear()
        elif mode == "json":
            click.echo(json.dumps(record))  # click.echo flushes
        elif mode == "lines":
            click.echo(row_line(record))
        else:
            news.append(1)

    with stop_on_signal() as stop:
        table = follow(cfg.kafka, emit, set(video_ids) or None, keep_following, stop)
    if mode == "table":
        click.echo(table.render(last=10**9))
    if mode != "live":  # (live: under the table, redrawn with it)
        for warning in one_way(table):
            click.echo(f"scores: warning: {warning}", err=True)


def display(keep_following: bool, tty: bool, as_json: bool) -> Literal["json", "live", "lines", "table"]:
    """How ``lastmile scores`` shows what it reads: JSON lines; a table redrawn in place, clearing the screen
    (following, on a terminal); one flushed line per record as it comes (following, piped); else one table once
    everything so far is read (the screen left as it was)."""
    if as_json:
        return "json"
    if keep_following:
        return "live" if tty else "lines"
    return "table"


CANARY_ADVICE = Advice(
    outside_roots="leave out --by-reference, or add its folder to sources.file_roots in --config",
    url_inline="use --by-reference",
)


@click.group("canary", cls=LastmileGroup)
def canary_group() -> None:
    """Labelled canary videos fed into the input topic, so live AUC exists without production labels."""


@canary_group.command("run")
@click.option(
    "--manifest",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSONL of labelled videos (lastmile corpus synth writes one)",
)
@click.option("--rate", default="6/min", show_default=True, help="videos per minute (N/min), second or hour")
@click.option("--count", type=int, default=None, help="stop after this many (default: run until stopped)")
@config_option("gateway.yaml (kafka)")
@BOOTSTRAP
@click.option("--by-reference", is_flag=True, help="send file:// URIs (the gateways must share the folder)")
@NO_SHA256
def canary_run(manifest, rate, count, config_path, bootstrap, by_reference, no_sha256) -> None:
    """Send the manifest's videos, over and over, each with a fresh video_id and canary: true."""
    configure_logging("INFO")
    cfg = gateway_config(config_path, bootstrap)
    kafka = cfg.kafka
    try:
        with stop_on_signal() as stop:
            hashes = FileDigests()  # (each file hashed once by the check and the first canaries of it)
            feed = CanaryFeed(
                kafka, manifest, parse_rate(rate), inline=not by_reference, digests=not no_sha256, hashes=hashes
            )
            # before any broker: a bad manifest is one line, and every row is checked as the gateways (this
            # --config) would take it: under their roots, from their hosts (expand reads it as feed.rows() does)
            notes: list[str] = []
            items = expand([manifest], notes=notes)
            notify("canary", notes)  # (before the check: a refused row's cause may be a key it names)
            Sender(cfg, inline=not by_reference, advice=CANARY_ADVICE, hashes=hashes).check(items)
            sent = feed.run(count=count, stop=stop)
    except (CanaryError, SendError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{sent} canaries sent to {kafka.input_topic}")
