"""``lastmile detectors``: the reference detectors and the user's, in the model repository."""

from __future__ import annotations

import json
from pathlib import Path

import click

from detectors.errors import CardError
from gateway.cli.errors import LastmileGroup
from gateway.cli.options import REPO
from transforms.support.config_errors import ConfigError


@click.group("detectors", cls=LastmileGroup)
def detectors_group() -> None:
    """Reference and user detectors in the model repository."""


@detectors_group.command("list")
@REPO
def detectors_list(repo) -> None:
    """The shipped reference detectors and the user repository's (a user detector of the same name wins), each
    version on its line (a further one as NAME@VERSION)."""
    from detectors.repository import list_versions

    installed = list_versions(repo)
    width = max([12, *(len(name) for name in installed)])
    # each detector's versions together, its default one first
    for name, inst in sorted(installed.items(), key=lambda item: (item[1].card.name, not item[1].default, item[0])):
        c = inst.card
        decides = f"threshold {c.threshold.value:+.4f}"
        where = str(inst.model_path)
        if c.chat is not None:
            from detectors.chat.prompts import load_template

            if load_template(c.chat.prompt, inst.folder).format != "rating":
                decides = "its verdict     "
            where = f"chat: {c.chat.model} at {c.chat.endpoint}, prompt {c.chat.prompt}"
        elif c.remote is not None:
            where = f"remote: {c.remote.model} at {c.remote.endpoint}"
        click.echo(f"{name:{width}s} {inst.origin:8s} {c.version:18s} {c.family:45s} {decides}  {where}")


@detectors_group.command("build")
@click.option(
    "--out",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="default: the package's triton_models/ (in a source checkout: the committed detectors)",
)
@click.option("--seed", default=1000, show_default=True, type=int, help="seed of the training corpus and the weights")
@click.option("--anchors", default=64, show_default=True, type=int, help="real anchors of the training corpus")
@click.option("--epochs", default=12, show_default=True, type=int, help="NPR training epochs")
@click.option(
    "--augment",
    "augment",
    is_flag=True,
    help="retrain npr and spectral with the dissemination augmentation, each installed beside its default version",
)
@click.option(
    "--augment-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="with --augment: the augmentation's distribution (YAML; default: the six conditions, equal weights)",
)
@click.option("--rounds", default=4, show_default=True, type=int, help="with --augment: draws rendered per video")
@click.option("--workers", default=2, show_default=True, type=int, help="with --augment: rendering processes")
def detectors_build(out, seed, anchors, epochs, augment, augment_config, rounds, workers) -> None:
    """Train (torch, extra `train`) and export the four reference detectors with their model cards; with
    --augment, npr and spectral again against dissemination, as a second version of each."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise click.ClickException("building needs torch: pip install '.[train]'") from exc
    from detectors.reference.build import BuildConfig, build
    from detectors.repository import SHIPPED_REPO

    cfg = BuildConfig(seed=seed, anchors=anchors, npr_epochs=epochs)
    log = lambda m: click.echo(m, err=True)  # noqa: E731
    if augment:
        from detectors.reference.augmented import build_augmented
        from transforms.augment import AugmentConfig, load_augment_config

        aug = load_augment_config(augment_config) if augment_config else AugmentConfig()
        summary = build_augmented(cfg, aug, out or SHIPPED_REPO, rounds=rounds, workers=workers, log=log)
    elif augment_config:
        raise click.UsageError("--augment-config applies with --augment")
    else:
        summary = build(cfg, out or SHIPPED_REPO, log=log)
    click.echo(json.dumps(summary, indent=2, default=float))


@detectors_group.command("add")
@click.argument("model", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--card",
    "card_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="the detector's model card (YAML), naming its ONNX model beside it",
)
@REPO
@click.option("--force", is_flag=True, help="replace an installed detector of the same name")
@click.option("--dry-run", is_flag=True, help="print what would be composed and the checks; install nothing")
@click.option(
    "--beside",
    is_flag=True,
    help="install as a further version beside the installed one of the same name (picked as NAME@VERSION)",
)
def detectors_add(model, card_path, repo, force, dry_run, beside) -> None:
    """Check a user's ONNX detector against its model card, compose it to the gateway's contract where its
    card says it takes another (layout, dtype, normalisation, channel order, per-frame, two classes), install.
    Without MODEL, the card must name a remote Open Inference Protocol server (remote:) or a Chat Completions
    server (chat:)."""
    from detectors.card import load_card
    from detectors.repository import install, install_remote, prepare, user_repo
    from detectors.serving.config import write_configs

    try:
        card = load_card(card_path)
        if model is None:  # a detector served elsewhere: its card names the server
            kind, where = _served_at(card)
            if dry_run:
                click.echo(f"{card.name}: {kind}, {where}; checked against its server at start")
                return
            inst = install_remote(card, repo, overwrite=force, card_dir=Path(card_path).resolve().parent)
            click.echo(f"installed {kind} {inst.card.name} {inst.card.version} ({where})")
            return
        if dry_run:
            _, served = prepare(model, card)
            click.echo(_dry_run_report(card, served, user_repo(repo)))
            return
        inst = install(model, card, repo, overwrite=force, beside=beside)
    except ConfigError:
        raise  # a card file that cannot be read as written: one line, exit status 2
    except CardError as exc:
        raise click.ClickException(str(exc)) from exc
    # Triton's configs for this model (a version beside the default one is not Triton's); the others stay as they are
    if inst.default:
        write_configs(inst)
    click.echo(f"installed {inst.key if beside else inst.card.name} {inst.card.version} at {inst.model_path}")


def _served_at(card) -> tuple[str, str]:
    """What kind of server a card without a model names, and where (a chat card: its model and prompt too)."""
    if card.chat is not None:
        return "chat", f"{card.chat.model} at {card.chat.endpoint}, prompt {card.chat.prompt}"
    return "remote", card.remote.endpoint if card.remote else "no server named"


@detectors_group.command("prompt")
@click.argument("preset", type=click.Choice(["binary", "rating", "diagnostic"]))
def detectors_prompt(preset) -> None:
    """Print a chat detector's preset prompt template (RA-Bench's Binary, Rating or Diagnostic format), to copy
    beside a card, change, and name in its chat.prompt."""
    from detectors.chat.prompts import preset_text

    click.echo(preset_text(preset), nl=False)


def _dry_run_report(card, served, repo: Path) -> str:
    """What ``detectors add --dry-run`` would compose and install, after the checks passed."""
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


@detectors_group.command("calibrate")
@click.argument("run", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--real-recall",
    "target",
    required=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="the share of the run's real videos on original to keep real, e.g. 0.95",
)
@click.option("--detectors", "names", default=None, help="comma-separated detectors of the run (default: all of them)")
@click.option(
    "--force",
    is_flag=True,
    help="write thresholds whose RealR interval is wider than 20 points (too few real videos to estimate it)",
)
@REPO
def detectors_calibrate(run, target, names, force, repo) -> None:
    """Set each detector's threshold to the one giving RealR --real-recall on RUN's real videos under original,
    with where it comes from, in its card in the user repository: the gateway and the replay decide with it from
    their next start (the monitor reads the gateway's decisions). RUN should be a replay of your own real uploads
    (a labelled sample). A threshold whose RealR has a Wilson 95% interval wider than 20 points (too few reals) is
    refused, and nothing written, unless --force."""
    import datetime
    import hashlib

    from detectors.card import Recalibration, Threshold
    from detectors.repository import list_versions, set_threshold
    from detectors.serving.config import write_configs
    from gateway.batch.results import ResultsError, read_results
    from gateway.evaluation.calibration import calibrate_run
    from gateway.evaluation.errors import EvaluationError

    results = run / "results.parquet"
    installed = list_versions(repo)
    try:
        digest = hashlib.sha256(results.read_bytes()).hexdigest() if results.is_file() else ""
        rows = read_results(results)  # (the file hashed is the file read: a run's results are written once)
        done = calibrate_run(rows, target, [n.strip() for n in names.split(",")] if names else None)
    except (EvaluationError, ResultsError) as exc:
        raise click.ClickException(str(exc)) from exc
    chosen = []
    for c in done:  # every one checked before any card is written
        # the version the run scored where it is installed beside the default one, else the default (by its name)
        same = (i for i in installed.values() if (i.card.name, i.card.version) == (c.detector, c.version))
        inst = next(same, installed.get(c.detector))
        if inst is None:
            raise click.ClickException(f"{c.detector}: not installed here (lastmile detectors list)")
        if inst.card.version != c.version or (c.model_sha256 and inst.model_sha256 not in (None, c.model_sha256)):
            raise click.ClickException(
                f"{c.detector}: the run scored version {c.version} (model sha256 {c.model_sha256}), the installed one "
                f"is {inst.card.version} (model sha256 {inst.model_sha256}): calibrate on a run of the installed one"
            )
        chosen.append(inst)
    too_few = [why for c in done if (why := c.too_few)]
    if too_few and not force:  # (nothing written: every one checked first)
        raise click.ClickException("; ".join(too_few))
    at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    for c, inst in zip(done, chosen, strict=True):
        how = (
            f"lastmile detectors calibrate: RealR {target:g} on the {c.reals} real videos of run {run} under "
            f"original (reached {c.real_recall:.3f}, Wilson 95% [{c.interval[0]:.3f}, {c.interval[1]:.3f}])"
        )
        record = Recalibration(
            run=str(run),
            results_sha256=digest,
            reals=c.reals,
            real_recall=c.real_recall,
            interval=c.interval,
            previous=inst.card.threshold.value,
            at=at,
        )
        threshold = Threshold(value=c.threshold, calibration=how, target_real_recall=target, recalibrated=record)
        try:
            written = set_threshold(inst, threshold, repo)
        except CardError as exc:  # (a card that cannot be written, a graph that no longer loads)
            raise click.ClickException(f"{c.detector}: {exc}") from exc
        # Triton's configs beside a default version's model (a further version is not Triton's)
        if not written.card.served_elsewhere and written.default:
            write_configs(written)
        click.echo(
            f"{c.detector} {c.version}: threshold {inst.card.threshold.value:+.4f} -> {c.threshold:+.4f}; RealR "
            f"{c.real_recall:.3f} [{c.interval[0]:.3f}, {c.interval[1]:.3f}] on {c.reals} real videos (target "
            f"{target:g}); written to {written.folder / 'card.yaml'}"
        )
    click.echo(
        "The gateway and the replay decide with these thresholds from their next start (the monitor reads the "
        "gateway's decisions)."
    )
