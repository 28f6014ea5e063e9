"""Videos in and out: ``lastmile transform`` (condition variants of a video), ``lastmile augment`` (a manifest's
videos under drawn conditions, for training) and ``lastmile corpus`` (the proxy corpus)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from click.core import ParameterSource
from tqdm import tqdm

from gateway.cli.errors import LastmileGroup
from gateway.cli.options import FILE_ROOTS, profile_option

VIDEO_SUFFIXES = {".mp4", ".mov", ".webm", ".mkv"}  # what `corpus synth --real-dir` takes as an anchor


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--conditions", default="all", show_default=True, help="'all' or comma-separated names")
@click.option("--conditions-file", type=click.Path(exists=True, dir_okay=False), help="YAML/JSON conditions")
@profile_option("fidelity")
@click.option(
    "--deterministic/--no-deterministic", default=False, show_default=True, help="byte-identical output (1 thread)"
)
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="folder to write to")
def transform(inputs, conditions, conditions_file, profile, deterministic, out) -> None:
    """Write each INPUT's condition variants (MP4) and a JSON sidecar each to OUT."""
    from transforms.catalog import resolve_conditions
    from transforms.engine import Engine
    from transforms.errors import VideoError
    from transforms.profile import PROFILES

    conds, file_profile = resolve_conditions(conditions, conditions_file)
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
        raise click.ClickException(f"{failed} of {len(inputs)} inputs could not be transformed (the lines above)")


@click.group("corpus", cls=LastmileGroup)
def corpus() -> None:
    """The paired proxy corpus (a proxy for AI-generated video, not AI-generated video)."""


@corpus.command("synth")
@click.option(
    "--anchors",
    default=12,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="real anchors (each with 5 counterparts); with --real-dir, at most this many of its videos (default: all)",
)
@click.option("--seed", default=0, show_default=True, type=int, help="the same seed writes the same corpus")
@click.option("--size", default="192x144", show_default=True, help="WIDTHxHEIGHT")
@click.option("--fps", default=24, show_default=True, type=int, help="frames per second of every clip")
@click.option("--seconds", default="2-3", show_default=True, help="duration range MIN-MAX, within 2-8 s")
@click.option(
    "--real-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="use these videos as the real anchors, in name order (scaled, centre-cropped, sampled at --fps)",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="folder for the clips and manifest.jsonl",
)
def corpus_synth(anchors, seed, size, fps, seconds, real_dir, out) -> None:
    """Write real anchors, pseudo-generated counterparts and a JSONL manifest to OUT."""
    from detectors.proxy.corpus import PROXY_NOTICE, USER_ANCHORS_NOTICE, CorpusConfig, synthesize

    width, height = (int(v) for v in size.lower().split("x"))
    lo, _, hi = seconds.partition("-")
    reals = sorted(p for p in real_dir.iterdir() if p.suffix.lower() in VIDEO_SUFFIXES) if real_dir else None
    if reals is not None and not reals:
        raise click.UsageError(f"--real-dir {real_dir}: no video files ({', '.join(sorted(VIDEO_SUFFIXES))})")
    if reals and click.get_current_context().get_parameter_source("anchors") is ParameterSource.COMMANDLINE:
        reals = reals[:anchors]
    cfg = CorpusConfig(
        anchors=len(reals) if reals else anchors,
        seed=seed,
        width=width,
        height=height,
        fps=fps,
        min_seconds=float(lo),
        max_seconds=float(hi or lo),
    )
    with tqdm(total=cfg.anchors, desc="corpus", unit="anchor", file=sys.stderr) as bar:
        manifest = synthesize(cfg, out, reals, progress=bar.update)
    click.echo(f"{manifest}\n{USER_ANCHORS_NOTICE if reals else PROXY_NOTICE}")


@click.command()
@click.argument("manifest", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="folder to write to")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="the augmentation's distribution, profile and sampling (YAML; default: the six conditions, equal weights)",
)
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="the draws' seed")
@click.option("--epochs", default=1, show_default=True, type=click.IntRange(1, 1000), help="variants per video")
@FILE_ROOTS
def augment(manifest, out, config_path, seed, epochs, file_roots) -> None:
    """Render each video of MANIFEST under a condition drawn per (seed, video, epoch): MP4s, a JSON sidecar each and
    OUT/manifest.jsonl (for training ahead of time; the same draws as the Python API's)."""
    from gateway.batch.augment import FAILURES, MANIFEST, augment_manifest
    from transforms.augment import AugmentConfig, load_augment_config

    config = load_augment_config(config_path) if config_path else AugmentConfig()
    run = augment_manifest(manifest, out, config, seed, epochs, file_roots, log=lambda line: click.echo(line, err=True))
    drawn = ", ".join(f"{name} {n}" for name, n in sorted(run.drawn.items()))
    click.echo(f"{len(run.written)} variants written to {out} ({MANIFEST}); drawn: {drawn or 'none'}")
    if run.failed:
        raise click.ClickException(
            f"{len(run.failed)} of {len(run.failed) + len(run.written)} (video, epoch) pairs failed: {out / FAILURES}"
        )
