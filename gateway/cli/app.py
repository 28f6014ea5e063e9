"""The ``lastmile`` group, and every command group added to it."""

from __future__ import annotations

import click

from gateway.cli import bench, detector_repo, examples, flips, inputs, media, monitor, runs, serving, stack, tap
from gateway.cli.errors import LastmileGroup


@click.group(cls=LastmileGroup)
@click.version_option(package_name="lastmile-gateway")
def main() -> None:
    """lastmile: how detectors of AI-generated video behave once a video has been disseminated."""


for command in (
    examples.examples,
    media.transform,
    media.augment,
    media.corpus,
    bench.bench,
    detector_repo.detectors_group,
    runs.replay,
    runs.report,
    flips.flips,
    runs.demo,
    serving.triton_group,
    stack.up,
    stack.kafka_group,
    stack.gateway_group,
    tap.send,
    inputs.input_group,
    tap.scores,
    tap.canary_group,
    monitor.monitor_group,
    monitor.dashboards_group,
):
    main.add_command(command)
