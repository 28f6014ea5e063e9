"""Settings read from a YAML file, each overridable by a ``LASTMILE_*`` environment variable, with errors that
name the file, line, key path and allowed values."""

from __future__ import annotations

from pathlib import Path
from typing import Self

import yaml
from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from transforms.support.config_errors import ConfigError, describe, one_line


class YamlSettings(BaseSettings):
    """Settings read from a YAML file, each overridable by an environment variable (env wins)."""

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (env_settings, init_settings, file_secret_settings)  # env overrides the file

    @classmethod
    def load(cls, path: str | Path | None) -> Self:
        """The settings in ``path`` (none: the defaults), with the environment's overrides; a file that cannot be
        read or does not fit raises :class:`ConfigError` naming the file, line, key path and allowed values."""
        where = str(path) if path else f"the {cls.__name__} defaults and LASTMILE_* variables"
        text = ""
        try:
            text = Path(path).read_text() if path else ""
            raw = yaml.safe_load(text) if text else {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"{where}: cannot read: {one_line(exc)}") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a mapping of settings at the top level, got {type(raw).__name__}")
        try:
            return cls(**raw)
        except ValidationError as exc:
            raise ConfigError(describe(exc, where, cls, text)) from exc
