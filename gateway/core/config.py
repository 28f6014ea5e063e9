"""The gateway's configuration: pydantic settings from a YAML file, overridable by ``LASTMILE_*`` variables
(nested with ``__``, e.g. ``LASTMILE_KAFKA__BOOTSTRAP=broker:9092``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from detectors.runtimes.providers import ProviderSettings
from gateway.core.messages import MAX_FIELD_BYTES, MAX_URI_BYTES, score_event_bound
from gateway.core.sources import SourceError, allow_set
from transforms.catalog import resolve_conditions
from transforms.config_errors import ConfigError, describe, one_line
from transforms.limits import Limits
from transforms.spec import PROFILES, Condition, Profile


class KafkaSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bootstrap: str = "127.0.0.1:9092"
    input_topic: str = "lastmile.videos"
    output_topic: str = "lastmile.scores"
    dlq_topic: str | None = None  # default: "<input_topic>.dlq"
    group_id: str = "lastmile-gateway"
    client_id: str = "lastmile-gateway"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    max_poll_interval_ms: int = Field(300_000, ge=1000)
    session_timeout_ms: int = Field(10_000, ge=1000)
    heartbeat_interval_ms: int = Field(3_000, ge=100)
    max_poll_records: int = Field(16, ge=1)
    max_message_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="larger messages are dead-lettered (without their value)"
    )
    request_timeout_ms: int = Field(30_000, ge=1000, description="a broker request not answered by then fails")
    max_block_ms: int = Field(10_000, ge=100, description="longest a send may wait for metadata or buffer space")
    probe_interval_s: float = Field(5.0, gt=0, description="how often the gateway checks that the broker answers")
    probe_timeout_ms: int = Field(5000, ge=100, description="how long that check waits for an answer")
    ack_timeout_s: float = Field(30.0, gt=0, description="longest wait for the broker to acknowledge a video's events")
    oversize_records: Literal["dead_letter", "stop"] = Field(
        "dead_letter",
        description="a record batch over max_message_bytes, which no client can fetch: dead-lettered by reference "
        "(topic, partition, offset, size) and passed, or left to stop its partition (readiness then fails)",
    )
    stall_check_s: float = Field(5.0, gt=0, description="a position unmoved this long is checked for lag")
    stall_after_s: float = Field(
        60.0, gt=0, description="not ready once a partition with lag has not moved this long (paused ones aside)"
    )

    @property
    def dlq(self) -> str:
        return self.dlq_topic or f"{self.input_topic}.dlq"

    def client_options(self) -> dict:
        opts: dict = {
            "bootstrap_servers": self.bootstrap.split(","),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            opts.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.sasl_username,
                sasl_plain_password=self.sasl_password,
            )
        if self.ssl_cafile:
            opts["ssl_cafile"] = self.ssl_cafile
        return opts


class SourceSettings(BaseModel):
    """Where videos sent by reference may be read from. The default reads nothing: no file, no host."""

    model_config = ConfigDict(extra="forbid")
    file_roots: list[Path] = Field(
        default_factory=list,
        description="file:// URIs must resolve (symlinks followed) under one of these; none: no file",
    )
    http_allow_hosts: list[str] = Field(
        default_factory=list,
        description="host names (any case) or IP addresses that http(s):// URIs and redirects may name; none: no host",
    )
    http_timeout_s: float = Field(10.0, gt=0, description="connect and read timeout")
    http_total_s: float = Field(120.0, gt=0, description="deadline of one whole download")

    @field_validator("http_allow_hosts")
    @classmethod
    def _hosts_parse(cls, hosts: list[str]) -> list[str]:
        try:
            allow_set(hosts)  # each entry is a host name or an address, as a URL's host is parsed
        except SourceError as exc:
            raise ValueError(str(exc)) from exc
        return hosts


class MessageSettings(BaseModel):
    """Bounds on an input message's string fields, checked before any fetch: a longer one is dead-lettered as
    ``InvalidMessage`` (so no score event copies it)."""

    model_config = ConfigDict(extra="forbid")
    max_field_bytes: int = Field(
        MAX_FIELD_BYTES, ge=64, description="longest string field (video_id, source, anchor_id, tenant), UTF-8 bytes"
    )
    max_uri_bytes: int = Field(MAX_URI_BYTES, ge=256, description="longest uri, UTF-8 bytes")


class FanoutSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    policy: Literal["all", "sampled", "original_only"] = "all"
    sample_rate: float = Field(0.1, ge=0, le=1, description="share of videos that get every condition (sampled)")


class ShadowSettings(BaseModel):
    """Challengers scored on a deterministic share of traffic only (by video id hash, as the sampled fan-out)."""

    model_config = ConfigDict(extra="forbid")
    detectors: list[str] = Field(default_factory=list, description="detectors scored on the share only")
    share: float = Field(1.0, ge=0, le=1, description="share of videos the shadow detectors score")


class RunLimits(Limits):
    """The input's limits (:class:`transforms.limits.Limits`) and the worker's operational ones.

    The operational limits say how a video is run, not what it yields: they stay out of a replay's identity,
    so changing them never blocks ``--resume``.
    """

    worker_memory_mb: int | None = Field(
        3072, ge=64, description="a worker whose resident memory passes this is killed (as the OOM killer would)"
    )
    video_timeout_s: float = Field(900.0, gt=0, description="a worker still on one video after this is killed")
    max_attempts: int = Field(
        3, ge=1, description="runs of a video whose own worker died, overran or raised unexpectedly, before it is final"
    )


OPERATIONAL_LIMITS = frozenset({"max_encoder_mb", "worker_memory_mb", "video_timeout_s", "max_attempts"})


class PipelineSettings(BaseModel):
    """What determines a pipeline's results: conditions, encoder profile, detectors, runtime, limits.

    Shared by the replay (``ReplayConfig``) and the service (``GatewayConfig``), which build their pipeline
    from it with :func:`gateway.core.assembly.build_pipeline`.
    """

    conditions: str = "all"
    conditions_file: Path | None = None
    detectors: str = "all"
    repo: Path | None = None
    runtime: Literal["embedded", "triton"] = "embedded"
    triton_url: str = "127.0.0.1:8001"
    triton_startup_timeout_s: float = Field(30.0, gt=0, description="how long a worker waits for Triton's model")
    onnxruntime: ProviderSettings = Field(default_factory=ProviderSettings)  # embedded: provider, GPU options
    profile: str = "fidelity"
    deterministic: bool = True  # same input, same bytes, same scores: a redelivered video never scores differently
    limits: RunLimits = Field(default_factory=RunLimits)

    def resolve_conditions(self) -> tuple[tuple[Condition, ...], Profile]:
        """The conditions and the encoder profile (a conditions file's own profile wins over ``profile``)."""
        conditions, file_profile = resolve_conditions(self.conditions, self.conditions_file)
        return conditions, file_profile or PROFILES[self.profile]


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


class GatewayConfig(YamlSettings, PipelineSettings):
    model_config = SettingsConfigDict(env_prefix="LASTMILE_", env_nested_delimiter="__", extra="forbid")
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    sources: SourceSettings = Field(default_factory=SourceSettings)
    messages: MessageSettings = Field(default_factory=MessageSettings)
    fanout: FanoutSettings = Field(default_factory=FanoutSettings)
    shadow: ShadowSettings = Field(default_factory=ShadowSettings)
    workers: int = Field(2, ge=1, le=256)
    max_in_flight: int = Field(4, ge=1, description="videos admitted at once (queued, running or publishing)")
    http_host: str = Field("127.0.0.1", description="where /metrics, /healthz, /readyz listen (a pod: 0.0.0.0)")
    http_port: int = Field(9308, ge=0, le=65535)
    retry_backoff_s: float = Field(1.0, gt=0, description="first wait before retrying an unavailable scorer or broker")
    retry_backoff_max_s: float = Field(30.0, gt=0, description="the cap of that exponential backoff")
    shutdown_timeout_s: float = Field(60.0, gt=0, description="on SIGTERM, how long in-flight videos may finish")

    @model_validator(mode="after")
    def _records_fit(self) -> Self:
        """The one record limit, ``kafka.max_message_bytes``, must hold the largest score event the message
        bounds allow (the consumer's fetch sizes and the producer's request size derive from it)."""
        needed = score_event_bound(self.messages.max_field_bytes)
        if self.kafka.max_message_bytes < needed:
            raise ValueError(
                f"kafka.max_message_bytes ({self.kafka.max_message_bytes}) is below the largest score event "
                f"({needed} bytes with messages.max_field_bytes {self.messages.max_field_bytes})"
            )
        return self
