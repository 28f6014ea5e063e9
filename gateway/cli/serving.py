"""``lastmile triton``: the detectors behind NVIDIA Triton (model repository, local server, TensorRT plans)."""

from __future__ import annotations

from pathlib import Path

import click

from gateway.cli.errors import LastmileGroup
from gateway.cli.options import REPO
from gateway.cli.signals import serve_until_signalled


@click.group("triton", cls=LastmileGroup)
def triton_group() -> None:
    """Detectors behind NVIDIA Triton: model repository, local server, TensorRT plans."""


@triton_group.command("repo")
@REPO
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="stage a complete model repository here: the shipped detectors and the user's",
)
def triton_repo(repo, out) -> None:
    """Write config.pbtxt (production), configs/cpu.pbtxt and configs/local.pbtxt per detector: beside each
    user detector, or with --out into a staged repository of every detector, ready to mount in Triton."""
    from detectors.serving.config import write_repository

    for path in write_repository(repo, out):
        click.echo(path)


@triton_group.command("serve")
@REPO
@click.option("--grpc-port", default=8001, show_default=True, type=int, help="Triton's gRPC port (the gateway's)")
@click.option("--http-port", default=8000, show_default=True, type=int, help="Triton's HTTP port (health, models)")
@click.option("--metrics-port", default=8002, show_default=True, type=int, help="Triton's Prometheus metrics port")
def triton_serve(repo, grpc_port, http_port, metrics_port) -> None:
    """Start the tritonserver that nvidia-pytriton ships (extra `triton-local`) with the local configs."""
    from detectors.serving.local import LocalTriton

    server = LocalTriton(repo, http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port).start()
    click.echo(f"Triton ready: gRPC {server.url}, HTTP 127.0.0.1:{http_port}, metrics 127.0.0.1:{metrics_port}")
    serve_until_signalled(server.process, server.close)


@triton_group.command("tensorrt")
@click.argument("detector")
@REPO
def triton_tensorrt(detector, repo) -> None:
    """Build a TensorRT plan (FP16) for DETECTOR with trtexec, where TensorRT is present."""
    from detectors.serving.tensorrt import build_tensorrt

    click.echo(build_tensorrt(detector, repo))
