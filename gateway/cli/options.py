"""The options several commands share, each declared once and applied as a decorator, and how ``--config`` and
``--bootstrap`` become a gateway configuration."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gateway.batch.failures import DEFAULT_MAX_INFRA_ERRORS
from gateway.core.contenders import PairError, distinct_pairs, split_pair
from gateway.core.kafka_settings import KafkaSettings
from transforms.profile import PROFILES

if TYPE_CHECKING:
    from gateway.core.config import GatewayConfig

UP_DIR = Path("lastmile-up")  # where `lastmile up` writes its configs and logs (relative to the current folder)
UP_CONFIG_HELP = "gateway.yaml (default: lastmile-up/gateway.yaml, written by lastmile up)"

REPO = click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    help="user model repository (default: $LASTMILE_REPO, else ~/.local/share/lastmile/models)",
)
JSON_OUT = click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="write JSON here")
BOOTSTRAP = click.option("--bootstrap", default=None, help="overrides the config's kafka.bootstrap")
FILE_ROOTS = click.option(
    "--file-root",
    "file_roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="a folder the manifest's videos may be read from, besides the manifest's own (repeatable)",
)
WORKERS = click.option("--workers", type=click.IntRange(min=1), default=None, help="parallel videos (default: cores)")
LOG_LEVEL = click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    help="the least severe log records written: DEBUG, INFO, WARNING or ERROR",
)
MAX_INFRA_ERRORS = click.option(
    "--max-infra-errors",
    default=DEFAULT_MAX_INFRA_ERRORS,
    show_default=True,
    type=click.IntRange(min=0),
    help="infrastructure-error rows allowed before the command exits non-zero (any cell without a score fails it)",
)


def config_option(help: str):
    """``--config``: a YAML file that exists, passed on as ``config_path``."""
    return click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), help=help)


def distinct_pairs_option(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """A ``--compare`` callback: a malformed or repeated pair is a usage error, as the monitor's is."""
    try:
        distinct_pairs(map(split_pair, value))
    except PairError as exc:
        raise click.BadParameter(str(exc)) from exc
    return value


def profile_option(default: str):
    """``--profile``: one of the transform engine's profiles."""
    return click.option(
        "--profile",
        type=click.Choice(sorted(PROFILES)),
        default=default,
        show_default=True,
        help="how the encoders run: fidelity (x264 medium, VP9 good) or throughput (veryfast, VP9 realtime)",
    )


def with_bootstrap(kafka: KafkaSettings, bootstrap: str | None) -> KafkaSettings:
    """``kafka`` with its broker replaced by ``bootstrap``, where one is given."""
    return kafka.model_copy(update={"bootstrap": bootstrap}) if bootstrap else kafka


def gateway_config(config_path: str | None, bootstrap: str | None = None) -> GatewayConfig:
    """The gateway configuration of ``--config`` (none: the defaults), with ``--bootstrap`` over its broker."""
    from gateway.core.config import GatewayConfig  # the pipeline's settings import the transforms: not at start-up

    cfg = GatewayConfig.load(config_path)
    return cfg.model_copy(update={"kafka": with_bootstrap(cfg.kafka, bootstrap)}) if bootstrap else cfg


NO_STACK_CONFIG = (
    f"no --config given and no {UP_DIR}/gateway.yaml here ({{cwd}}): using the defaults (broker {{bootstrap}}, "
    "no folder the gateway reads files from); run this in the folder where `lastmile up` runs, or pass --config"
)


def stack_config(command: str, config_path: str | None, bootstrap: str | None = None) -> tuple[GatewayConfig, bool]:
    """For the stack's clients (``send``, ``scores``): the gateway configuration of ``--config``, else the one
    ``lastmile up`` wrote in this folder, else the defaults; which of the three is said on stderr, since the
    defaults read no folder and a client started in the wrong folder would otherwise fail for a reason it hides.
    Returns the configuration and whether a file gave it."""
    if config_path is None and (UP_DIR / "gateway.yaml").exists():
        config_path = str(UP_DIR / "gateway.yaml")
        click.echo(f"{command}: note: using {config_path}, the stack's config written by lastmile up", err=True)
    cfg = gateway_config(config_path, bootstrap)
    if config_path is None:
        note = NO_STACK_CONFIG.format(cwd=Path.cwd(), bootstrap=cfg.kafka.bootstrap)
        click.echo(f"{command}: note: {note}", err=True)
    return cfg, config_path is not None
