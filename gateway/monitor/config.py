"""The monitor's configuration (``lastmile monitor run --config monitor.yaml``): pydantic settings from YAML,
overridable by ``LASTMILE_MONITOR_*`` variables (nested with ``__``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import SettingsConfigDict

from gateway.core.contenders import distinct_pairs, split_pair
from gateway.core.kafka_settings import KafkaSettings
from gateway.core.yaml_settings import YamlSettings


class MonitorKafka(KafkaSettings):
    """The broker and topics: ``output_topic`` is the score topic the gateways publish to."""

    labels_topic: str | None = Field("lastmile.labels", description="delayed ground truth (null: none)")
    group_id: str = "lastmile-monitor"
    client_id: str = "lastmile-monitor"

    def _questions_fit_the_poll_interval(self) -> MonitorKafka:
        """Not the monitor's rule: it reads without a group (no poll interval to keep), so no check."""
        return self


class WindowSettings(BaseModel):
    """Exact windows by event time (the input message's Kafka timestamp), per (detector, version, condition)."""

    model_config = ConfigDict(extra="forbid")
    seconds: float = Field(3600.0, gt=0, description="the time window: videos whose event time is this recent")
    count: int = Field(500, ge=2, description="the count window: the latest N videos of a series, by event time")
    stale_after_s: float = Field(900.0, gt=0, description="a series with no sample this recent leaves /metrics")
    label_ttl_s: float = Field(
        86_400.0, gt=0, description="how long a label may come before its video's first score (Kafka timestamps)"
    )
    timestamp_skew_s: float = Field(
        5.0, ge=0, description="how far a record's timestamp may trail one read before it on the same partition"
    )
    max_videos: int = Field(
        100_000, ge=10, description="bound on videos held (about 150 bytes per score event); past it the oldest go"
    )
    max_waiting_labels: int = Field(1_000_000, ge=10, description="bound on labels waiting for their video")
    confidence: float = Field(0.95, gt=0, lt=1, description="of every exported interval")
    compute_interval_s: float = Field(
        5.0, gt=0, description="pause between two computations of the windowed series (a scrape serves the latest)"
    )

    @property
    def lookback_s(self) -> float:
        """How far back a (re)started monitor reads the score topic: its longest window."""
        return self.seconds

    @property
    def label_lookback_s(self) -> float:
        """How far back it reads the labels topic: a label may come before its scores by up to the TTL."""
        return self.seconds + self.label_ttl_s


class CheckpointSettings(BaseModel):
    """The store written to ``directory`` every ``interval_s`` (with the partition positions it covers); a start
    loads the newest valid one and reads only the topics' tail after it. Null directory: no checkpoints."""

    model_config = ConfigDict(extra="forbid")
    directory: Path | None = Field(None, description="where checkpoints are written (a volume of the pod)")
    interval_s: float = Field(60.0, gt=0, description="time between two checkpoints, once the windows are rebuilt")
    keep: int = Field(2, ge=1, description="checkpoints kept, newest first")


# what a comparison reads: videos that are not canaries, or canaries
Population = Literal["traffic", "canary"]
POPULATIONS: tuple[str, ...] = get_args(Population)


class ComparisonSettings(BaseModel):
    """A champion and a challenger (``DETECTOR`` or ``DETECTOR@VERSION``; without a version, the version with the
    latest score) compared per condition on the videos both scored (:mod:`gateway.monitor.comparisons`)."""

    model_config = ConfigDict(extra="forbid")
    champion: str = Field(min_length=1)
    challenger: str = Field(min_length=1)
    margin: float = Field(-0.05, le=0, description="alert when the robustness difference's upper bound lies below this")
    min_samples: int = Field(50, ge=4, description="labelled videos scored by both (and on original) to alert")
    population: Population = Field(
        "traffic",
        description="the videos compared: traffic (labelled by the labels topic, or not at all) or the labelled "
        "canaries of lastmile canary run, which give labelled comparisons without production labels",
    )

    @model_validator(mode="after")
    def _two_contenders(self) -> ComparisonSettings:
        # PairError is a ValueError: a validation error; the sides kept are the pair's, spaces dropped
        self.champion, self.challenger = split_pair(f"{self.champion}:{self.challenger}")
        return self


class MonitorConfig(YamlSettings):
    model_config = SettingsConfigDict(env_prefix="LASTMILE_MONITOR_", env_nested_delimiter="__", extra="forbid")
    kafka: MonitorKafka = Field(default_factory=MonitorKafka)
    windows: WindowSettings = Field(default_factory=WindowSettings)
    checkpoint: CheckpointSettings = Field(default_factory=CheckpointSettings)
    http_host: str = Field(
        "127.0.0.1", description="where the page (/), /metrics, /healthz, /readyz listen (a pod: 0.0.0.0)"
    )
    http_port: int = Field(9309, ge=0, le=65535)
    poll_max_records: int = Field(2000, ge=1, description="score events read per poll")
    comparisons: list[ComparisonSettings] = Field(default_factory=list, description="champion vs challenger")
    canary_command: str | None = Field(
        None,
        max_length=1000,
        description="the command the live page names where no canary has been scored (lastmile up sets it)",
    )
    alerts_from: AnyHttpUrl | None = Field(
        None,
        description="a Prometheus server (its base URL) evaluating the shipped rules: the live page at / lists "
        "its firing and pending Lastmile alerts (null: the page says none is configured)",
    )

    @model_validator(mode="after")
    def _windows_fit(self) -> MonitorConfig:
        if self.windows.count > self.windows.max_videos:
            raise ValueError("windows.count cannot exceed windows.max_videos")
        for population in POPULATIONS:
            # a pair once per population
            distinct_pairs((c.champion, c.challenger) for c in self.comparisons if c.population == population)
        return self
