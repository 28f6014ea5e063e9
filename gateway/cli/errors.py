"""How the command line reports what a user can act on: an error in one line, no traceback, the exit status; a
note (``<command>: note: ...``) on stderr for what does not stop the run."""

from __future__ import annotations

import re
from collections.abc import Iterable

import click
from pydantic import ValidationError

from detectors.errors import TritonNotInstalled
from gateway.bus import BusError, ClientConfigError
from gateway.ops.stack import StackError
from gateway.toolkit.http import CannotListen
from gateway.toolkit.tansu import BrokerError
from transforms.support.config_errors import ConfigError, describe, one_line


def notify(command: str, notes: Iterable[str | None]) -> None:
    """Each note (None: none) as ``<command>: note: <note>`` on stderr."""
    for note in notes:
        if note:
            click.echo(f"{command}: note: {note}", err=True)


class BadConfiguration(click.ClickException):
    """A configuration, conditions file or manifest the user must fix: one line, exit status 2, no traceback."""

    exit_code = 2


_HINT = re.compile(r" ?\((--[a-z][a-z0-9-]*)\)")


def fit_hints(message: str, command: click.Command) -> str:
    """``message`` with each hint ``(--flag)`` that ``command`` has no such option for taken out: an error raised
    below the command line names the flag that sets what it names (``kafka.bootstrap (--bootstrap)``), and only the
    commands that have it show it."""
    flags = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    return _HINT.sub(lambda m: m.group(0) if m.group(1) in flags else "", message)


class LastmileGroup(click.Group):
    """The ``lastmile`` group and its groups: every expected configuration error becomes :class:`BadConfiguration`,
    and every error's hints name only flags of the command that failed (:func:`fit_hints`)."""

    def invoke(self, ctx: click.Context):
        try:
            return self._invoke(ctx)
        except click.ClickException as exc:
            leaf = self.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
            if leaf is not None and not isinstance(leaf, click.Group):  # (a group's own group fits them first)
                exc.message = fit_hints(exc.message, leaf)
            raise

    def _invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            raise BadConfiguration(str(exc)) from None
        except ValidationError as exc:  # options or LASTMILE_* variables that a settings model refuses
            raise BadConfiguration(describe(exc, f"the {exc.title} settings (options, LASTMILE_* variables)")) from None
        # a local broker, stack or Triton that cannot start (an extra not installed): say why, no traceback
        except (BrokerError, StackError, TritonNotInstalled, CannotListen) as exc:
            raise click.ClickException(str(exc)) from None
        except ClientConfigError as exc:  # a Kafka setting the client refuses (kafka.properties, a secret file)
            raise BadConfiguration(f"Kafka: {one_line(exc)}") from None
        except BusError as exc:  # a broker that does not answer: which, and what the client said
            raise click.ClickException(f"Kafka: {one_line(exc)}") from None
