"""The gateway's configuration: pydantic settings from a YAML file, overridable by ``LASTMILE_*`` variables
(nested with ``__``, e.g. ``LASTMILE_KAFKA__BOOTSTRAP=broker:9092``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import SettingsConfigDict

from detectors.runtimes.providers import ProviderSettings
from gateway.core.inputs import InputSettings
from gateway.core.kafka_settings import KafkaSettings
from gateway.core.messages import MAX_FIELD_BYTES, MAX_URI_BYTES, score_event_bound
from gateway.core.sources import SourceError, StoreSettings, allow_list
from gateway.core.sources.stores import check_prefix, require_sdk
from gateway.core.yaml_settings import YamlSettings
from transforms.catalog import resolve_conditions
from transforms.limits import Limits
from transforms.spec import PROFILES, Condition, Profile


def checked_hosts(hosts: list[str]) -> list[str]:
    """``hosts``, if each is an allow-list entry (:mod:`gateway.core.sources.allowlist`); else ``ValueError``."""
    try:
        allow_list(hosts)
    except SourceError as exc:
        raise ValueError(str(exc)) from exc
    return hosts


def checked_prefixes(prefixes: list[str]) -> list[str]:
    """``prefixes`` as compared (:func:`gateway.core.sources.stores.check_prefix`), if each is an object store
    prefix whose SDK is installed (the ``attach`` extra); else ``ValueError``."""
    try:
        checked = [check_prefix(p) for p in prefixes]
        for store in sorted({p.split(":", 1)[0] for p in checked}):
            require_sdk(store)
    except SourceError as exc:
        raise ValueError(str(exc)) from exc
    return checked


# a list of allow-list entries, or of object store prefixes, each checked where a model holds one
AllowHosts = Annotated[list[str], AfterValidator(checked_hosts)]
ObjectStores = Annotated[list[str], AfterValidator(checked_prefixes)]


class SourceSettings(BaseModel):
    """Where videos sent by reference may be read from. The default reads nothing: no file, no host."""

    model_config = ConfigDict(extra="forbid")
    file_roots: list[Path] = Field(
        default_factory=list,
        description="file:// URIs must resolve (symlinks followed) under one of these; none: no file",
    )
    http_allow_hosts: AllowHosts = Field(
        default_factory=list,
        description="hosts http(s):// URIs and redirects may name: 'name' (ports 80 and 443), 'name:port', an IP "
        "address, or a CIDR network that names may resolve into although private or loopback; none: no host",
    )
    http_timeout_s: float = Field(10.0, gt=0, description="connect and read timeout")
    http_total_s: float = Field(120.0, gt=0, description="deadline of one whole download")
    http_redirect_to_http: bool = Field(False, description="follow a redirect from https:// to http:// (drops TLS)")
    object_stores: ObjectStores = Field(
        default_factory=list,
        description="s3://, az:// and gs:// URIs must start with one of these prefixes ('s3://uploads/videos/', "
        "'az://media'); none: no object. Credentials: each SDK's own chain",
    )
    s3_endpoint_url: str | None = Field(
        None, description="an S3-compatible endpoint (MinIO, Ceph, R2); None: the SDK's (AWS_ENDPOINT_URL, or AWS)"
    )
    s3_addressing_style: Literal["auto", "path", "virtual"] = Field(
        "auto", description="'path' for an S3-compatible store without virtual-host buckets"
    )
    azure_account_url: str | None = Field(
        None,
        description="https://ACCOUNT.blob.core.windows.net (with DefaultAzureCredential); None: "
        "AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT",
    )

    def stores(self) -> StoreSettings:
        """What the object stores' SDKs are given (:mod:`gateway.core.sources.stores`)."""
        urls = (self.s3_endpoint_url, self.s3_addressing_style, self.azure_account_url)
        return StoreSettings(*urls, timeout_s=self.http_timeout_s, total_s=self.http_total_s)


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
    from it with :func:`gateway.scoring.assembly.build_pipeline`.
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
    chat_cache: bool = Field(True, description="keep chat detectors' replies, so a repeated request is not paid twice")

    def resolve_conditions(self) -> tuple[tuple[Condition, ...], Profile]:
        """The conditions and the encoder profile (a conditions file's own profile wins over ``profile``)."""
        conditions, file_profile = resolve_conditions(self.conditions, self.conditions_file)
        return conditions, file_profile or PROFILES[self.profile]


class GatewayConfig(YamlSettings, PipelineSettings):
    model_config = SettingsConfigDict(env_prefix="LASTMILE_", env_nested_delimiter="__", extra="forbid")
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    sources: SourceSettings = Field(default_factory=SourceSettings)
    input: InputSettings = Field(default_factory=InputSettings)
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
