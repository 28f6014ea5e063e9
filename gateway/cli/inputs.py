"""``lastmile input``: a team's mapping of its own upload events (``input:``), tried on a sample before it deploys."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from gateway.cli.errors import LastmileGroup
from gateway.cli.options import config_option, gateway_config

FIELDS = ("video_id", "uri", "label", "sha256")


@click.group("input", cls=LastmileGroup)
def input_group() -> None:
    """The input topic's events: how the gateway reads them."""


@input_group.command("check")
@click.argument("sample", type=click.Path(allow_dash=True, dir_okay=False, path_type=Path))
@config_option("the gateway's configuration (its input: and sources: sections)")
@click.option("--topic", default=None, help="the topic the sample came from (default: kafka.input_topic)")
def check(sample, config_path, topic) -> None:
    """Print what the gateway takes from SAMPLE (one message's value: a file, or - for standard input): the
    mapped fields, and whether its sources may read the video. Exit 2 when the mapping fails (naming the field
    and its expression) or the video lies outside what the gateway may read."""
    from gateway.core.messages import InvalidMessage
    from gateway.core.sources import SourceError, admit_remote, is_remote
    from gateway.stream.inputs import EventReader

    cfg = gateway_config(config_path)
    value = sys.stdin.buffer.read() if str(sample) == "-" else _read(sample)
    try:
        event, inline, event_time = EventReader(cfg.input, cfg.messages).read(value, [], topic or cfg.kafka.input_topic)
    except InvalidMessage as exc:
        click.echo(f"refused (the gateway dead-letters it as InvalidMessage): {exc}", err=True)
        sys.exit(2)
    shown = event.model_dump(include=set(FIELDS), exclude_none=True)
    for name in FIELDS:
        click.echo(f"{name + ':':12}{shown.get(name, '-')}")
    when = "- (the record's timestamp)"
    if event_time is not None:
        when = f"{event_time} ({datetime.fromtimestamp(event_time, UTC).isoformat()})"
    click.echo(f"{'event_time:':12}{when}")
    if inline is not None:
        click.echo(f"{'inline:':12}{len(inline)} bytes")
        return
    uri = event.uri or ""
    s = cfg.sources
    try:
        if is_remote(uri):
            admit_remote(uri, s.http_allow_hosts, s.object_stores)
        elif not s.file_roots:
            raise SourceError("a file, and sources.file_roots is empty")
    except SourceError as exc:
        click.echo(f"refused (the gateway dead-letters it as SourceError): {exc}", err=True)
        sys.exit(2)
    click.echo(f"{'sources:':12}the gateway may read it (nothing was fetched)")


def _read(sample: Path) -> bytes:
    try:
        return sample.read_bytes()
    except OSError as exc:
        raise click.ClickException(f"cannot read {sample}: {exc.strerror or exc}") from exc
