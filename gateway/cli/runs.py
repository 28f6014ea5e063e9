"""Offline runs over a manifest: ``replay``, ``report`` and ``demo``."""

from __future__ import annotations

import json
import shlex
import signal
import sys
from pathlib import Path

import click

from gateway.batch.failures import RunFailures, check_results
from gateway.cli.errors import notify
from gateway.cli.options import FILE_ROOTS, MAX_INFRA_ERRORS, REPO, WORKERS, distinct_pairs_option, profile_option
from gateway.cli.signals import interrupted_by_signal
from gateway.evaluation.errors import EvaluationError
from transforms.support.config_errors import ConfigError


def _fail_loudly(failures: RunFailures, what: str, kept: str) -> None:
    """Print one line per error kind and per detector without scores to stderr; exit 1 where the run failed,
    saying what it ``kept``."""
    for line in failures.lines():
        click.echo(f"{what}: {line}", err=True)
    if failures.failed:
        raise click.ClickException(f"{what} failed: see the lines above ({kept} kept)")


@click.command()
@click.argument("manifest", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--conditions", default="all", show_default=True, help="'all' or comma-separated condition names")
@click.option(
    "--conditions-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="conditions of your own (YAML/JSON), instead of the built-in ones",
)
@click.option(
    "--detectors",
    "detector_names",
    default="all",
    show_default=True,
    help="'all' or comma-separated detector names (shipped or in --repo)",
)
@REPO
@click.option(
    "--runtime",
    type=click.Choice(["embedded", "triton"]),
    default="embedded",
    show_default=True,
    help="score in this process (onnxruntime) or on a Triton server",
)
@click.option(
    "--triton-url", default="127.0.0.1:8001", show_default=True, help="with --runtime triton: its gRPC address"
)
@profile_option("fidelity")
@click.option(
    "--deterministic/--no-deterministic",
    default=True,
    show_default=True,
    help="byte-identical variants on every run (the encoder on one thread)",
)
@WORKERS
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
    "--kafka-timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    default=1800.0,
    show_default=True,
    help="with --via kafka: the most seconds to wait for every score event",
)
@FILE_ROOTS
@click.option(
    "--http-allow-host",
    "http_allow_hosts",
    multiple=True,
    help="a host the manifest's http(s):// videos may be fetched from: 'name' or an IP address (ports 80 and 443), "
    "'name:port', or a CIDR network names may resolve into (repeatable; none: no host; docs/sources.md)",
)
@click.option(
    "--object-store",
    "object_stores",
    multiple=True,
    help="a prefix the manifest's s3:// and az:// videos may be read under: 's3://BUCKET/PREFIX' or "
    "'az://CONTAINER/PREFIX' (repeatable; none: no object; credentials and endpoints: each SDK's environment)",
)
@click.option(
    "--allow-missing",
    is_flag=True,
    help="run even if manifest rows name files that are not there, or URLs off the allow-list (each such video "
    "gets error rows); without it, the replay stops before scoring and names them",
)
@click.option(
    "--no-cache",
    "no_cache",
    is_flag=True,
    help="chat detectors: ask every request again, reading no reply from the cache (detectors/chat/cache.py)",
)
@MAX_INFRA_ERRORS
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="the run's folder: scores, report, plots and provenance",
)
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
    kafka_timeout_s,
    file_roots,
    http_allow_hosts,
    object_stores,
    allow_missing,
    no_cache,
    max_infra_errors,
    out,
) -> None:
    """Run every video of MANIFEST through the conditions and detectors into OUT/results.parquet; exit 1 where a
    (detector, condition) has no score or infrastructure errors exceed --max-infra-errors."""
    from detectors.manifest import read_manifest, unread_keys_notice
    from gateway.batch.kafka_replay import ReplayTimeout, replay_via_kafka
    from gateway.batch.manifest_files import check_files
    from gateway.batch.replay import ReplayConfig, check_out, reals_only_notice
    from gateway.batch.replay import replay as run_replay
    from gateway.stream.service import Gateway

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
        http_allow_hosts=list(http_allow_hosts),
        object_stores=list(object_stores),
        chat_cache=not no_cache,
    )
    if via == "kafka" and resume:
        raise click.UsageError("--resume applies to the in-process replay")
    rows = read_manifest(manifest)  # (a bad row: one line, before any work)
    got: list[int] = []  # the signal that interrupted the run, if one did
    try:
        check_out(cfg, out, resume)  # (before the note: a run that cannot start says only why)
        if not allow_missing:
            # a file that is not there or not under these roots, or a URL off the allow-list: one line each, exit 2,
            # before any work
            roots = cfg.fetch_rules().sources.file_roots
            check_files(manifest, rows, [Path(r) for r in roots], cfg.http_allow_hosts, cfg.object_stores)
        notify("replay", (reals_only_notice(manifest, rows), unread_keys_notice(manifest, rows)))
        # Ctrl-C, SIGTERM, SIGHUP: said at once (how to go on), then the clean-up, which a second one cannot stop
        with interrupted_by_signal(lambda _: click.echo(_interrupted(out, via), err=True)) as got:
            if via == "kafka":
                path = replay_via_kafka(
                    cfg, out, bootstrap=bootstrap, workers=workers or 2, timeout_s=kafka_timeout_s, tap=Gateway
                )
            else:
                path = run_replay(cfg, out, resume=resume, workers=workers)
    except KeyboardInterrupt:
        sys.exit(128 + (got[0] if got else signal.SIGINT))  # (130 for Ctrl-C, 143 for SIGTERM, as shells say)
    except ConfigError:
        raise
    except (FileExistsError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    except ReplayTimeout as exc:  # which events were missing and where the gateway was: one line
        raise click.ClickException(f"replay via kafka: {exc}") from None
    click.echo(path)
    _fail_loudly(check_results(path, max_infra_errors), "replay", "the results are")


def _interrupted(out: Path, via: str) -> str:
    """What an interrupted replay says: the exact command that continues it (run where this one ran)."""
    if via == "kafka":
        return f"\nreplay interrupted: a replay via kafka cannot be resumed; run it again into another --out than {out}"
    args = sys.argv[1:] + ([] if "--resume" in sys.argv[1:] else ["--resume"])
    return (
        f"\nreplay interrupted: the videos finished so far are kept in {out}. Continue with (in {Path.cwd()}):\n"
        f"  {shlex.join(['lastmile', *args])}"
    )


def _enough_replicates(ctx: click.Context, param: click.Parameter, value: int) -> int:
    """The bootstrap's own check, as a usage error before any work."""
    from gateway.evaluation.bootstrap import check_replicates  # (numpy: not for every command's start)

    try:
        check_replicates(value)
    except EvaluationError as exc:
        raise click.BadParameter(str(exc)) from exc
    return value


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--replicates", default=2000, show_default=True, type=int, callback=_enough_replicates, help="bootstrap replicates"
)
@click.option("--seed", default=None, type=int, help="bootstrap seed (default: the project's fixed seed)")
@click.option(
    "--compare",
    "comparisons",
    multiple=True,
    metavar="CHAMPION:CHALLENGER",
    callback=distinct_pairs_option,
    help="also compare two detectors (NAME or NAME@VERSION) on the videos both scored: a section of the report "
    "with a forest plot, and comparison.md/.json (repeatable; a run of real videos only: their RealR, no plot)",
)
@click.option(
    "--calibrate",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    metavar="REALR",
    help="recalibrate every detector's threshold on this run's original reals to this RealR (e.g. 0.95), instead "
    "of its model card's",
)
@click.option(
    "--flips",
    "flips",
    default=3,
    show_default=True,
    type=click.IntRange(0),
    help="flipped videos shown per detector, condition and harmful kind (missed fakes, false alarms; corrections "
    "are counted), each with its frame strip (0: counts only; `lastmile flips --limit 0` lists them all)",
)
def report(run_dir, replicates, seed, comparisons, calibrate, flips) -> None:
    """Write RUN_DIR/report.md, report.json and report.html with its plots embedded (a run of real videos
    only: RealR and its drift per condition)."""
    from gateway.batch.results import ResultsError
    from gateway.evaluation.report import build_report

    try:
        paths = build_report(
            run_dir, replicates=replicates, seed=seed, comparisons=comparisons, calibrate=calibrate, flips=flips
        )
    except ResultsError as exc:  # (its message names the folder)
        raise click.ClickException(str(exc)) from exc
    except (EvaluationError, FileNotFoundError) as exc:
        raise click.ClickException(f"{run_dir}: {exc}") from exc
    for path in paths.values():
        click.echo(path)
    if not json.loads(paths["json"].read_text())["failures"]["scored_rows"]:  # written, and it says why
        raise click.ClickException(f"{run_dir}: no row of this run was scored, so no metric could be computed")


@click.command()
@click.option(
    "--out",
    default="lastmile-demo",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="folder for the corpus, the run and its report",
)
@click.option(
    "--anchors",
    default=12,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="real anchors of the proxy corpus (each with 5 counterparts)",
)
@profile_option("fidelity")
@WORKERS
@click.option("--sweeps", is_flag=True, help="also a scale-factor sweep of spatial and a two-hop repost of full")
@click.option(
    "--flips",
    default=1,
    show_default=True,
    type=click.IntRange(0),  # (gateway.ops.demo.DEMO_FLIPS)
    help="flipped videos shown with their frame strip per detector, condition and kind (missed fakes and false "
    "alarms first)",
)
@click.option(
    "--versions",
    is_flag=True,
    help="also each reference detector's further version (npr and spectral trained with the augmentation), "
    "compared with its default version",
)
@MAX_INFRA_ERRORS
def demo(out, anchors, profile, workers, sweeps, flips, versions, max_infra_errors) -> None:
    """Proxy corpus -> six LastMile conditions -> four reference detectors -> report, in one go; exit 1 where a
    (detector, condition) has no score or infrastructure errors exceed --max-infra-errors."""
    from gateway.ops.demo import run_demo

    done = run_demo(out, anchors, profile, workers, click.echo, sweeps, flips, versions)
    _fail_loudly(check_results(done["results"], max_infra_errors), "demo", "the results and the report are")
