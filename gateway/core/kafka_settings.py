"""Where a service meets Kafka: the broker, topics, consumer group, security and record limits (the gateway's
``kafka:`` block; the monitor's extends it). Kept apart from the pipeline's settings so that a service reading
only Kafka (the monitor, the bus) does not import the transforms.

The client is librdkafka (``client: librdkafka``, the default) or kafka-python (``client: kafka-python``, a
pure-Python engine); the typed settings below mean the same on both. ``properties`` passes any other librdkafka
property through, in librdkafka's own vocabulary (https://docs.confluent.io/platform/current/clients/librdkafka/
html/md_CONFIGURATION.html); librdkafka refuses one it does not know at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

SECRET_FILE_MAX_BYTES = 64 * 1024  # a password or key password read from a file: at most this much


class KafkaSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bootstrap: str = "127.0.0.1:9092"
    input_topic: str = "lastmile.videos"
    output_topic: str = "lastmile.scores"
    dlq_topic: str | None = None  # default: "<input_topic>.dlq"
    group_id: str = "lastmile-gateway"
    client_id: str = "lastmile-gateway"
    client: Literal["librdkafka", "kafka-python"] = Field(
        "librdkafka",
        description="the Kafka client: librdkafka (confluent-kafka, the default) or kafka-python (pure Python)",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_password_file: str | None = Field(None, description="read the SASL password from this file instead")
    ssl_cafile: str | None = None
    ssl_certfile: str | None = Field(None, description="the client's certificate (PEM), for a broker that asks one")
    ssl_keyfile: str | None = Field(None, description="the client certificate's private key (PEM)")
    ssl_key_password: SecretStr | None = None
    ssl_key_password_file: str | None = Field(None, description="read the key's password from this file instead")
    group_instance_id: str | None = Field(
        None, description="static membership: a member restarted under the same id keeps its partitions"
    )
    assignment_strategy: Literal["cooperative-sticky", "range", "roundrobin"] | None = Field(
        None,
        description="how the group spreads partitions; default: cooperative-sticky (only the partitions that move "
        "are revoked) on librdkafka, range then roundrobin (eager) on kafka-python, which runs eager ones only",
    )
    properties: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="any other librdkafka property, passed through as is (client: librdkafka only)",
    )
    statistics_interval_ms: int = Field(
        1000, ge=100, description="how often librdkafka reports its state (group, brokers, partitions) for health"
    )
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
    stall_check_s: float = Field(5.0, gt=0, description="a position unmoved this long is checked for lag")
    stall_after_s: float = Field(
        60.0, gt=0, description="not ready once a partition with lag has not moved this long (paused ones aside)"
    )
    idle_member_after_s: float = Field(
        300.0,
        gt=0,
        description="not ready once it has held no input partition while the group's records there have had no "
        "commit this long",
    )
    joining_member_after_s: float | None = Field(
        None,
        gt=0,
        description="the same while it is still joining its group; default: the longer of idle_member_after_s and "
        "a rebalance timeout (max_poll_interval_ms) plus a session (session_timeout_ms), which a join may take",
    )

    @model_validator(mode="after")
    def _one_source_per_secret(self) -> KafkaSettings:
        for name in ("sasl_password", "ssl_key_password"):
            if getattr(self, name) is not None and getattr(self, f"{name}_file") is not None:
                raise ValueError(f"{name} and {name}_file are both set: give one")
        if self.properties and self.client != "librdkafka":
            raise ValueError("properties are librdkafka's: they need client: librdkafka")
        if self.assignment_strategy == "cooperative-sticky" and self.client == "kafka-python":
            raise ValueError("the kafka-python engine runs eager assignors only: range or roundrobin")
        return self

    @model_validator(mode="after")
    def _questions_fit_the_poll_interval(self) -> KafkaSettings:
        """The poll loop asks the broker questions (the stall watch's, the health probe's), each waiting up to
        ``probe_timeout_ms``; a member that does not poll within ``max_poll_interval_ms`` is dropped from its group,
        and its records, the one it was asking about among them, come back to it: a loop that never ends."""
        if 2 * self.probe_timeout_ms > self.max_poll_interval_ms:
            raise ValueError(
                f"probe_timeout_ms ({self.probe_timeout_ms}) is over half of max_poll_interval_ms "
                f"({self.max_poll_interval_ms}): a poll loop waiting on the broker would be dropped from its group; "
                "lower probe_timeout_ms or raise max_poll_interval_ms"
            )
        return self

    @property
    def joining_after_s(self) -> float:
        """How long a member still joining its group may hold nothing while the group's records wait: the setting,
        else the longer of ``idle_member_after_s`` and what a join may take (the group waits up to a rebalance
        timeout, ``max_poll_interval_ms``, for its members; a member's session more for one that died)."""
        if self.joining_member_after_s is not None:
            return self.joining_member_after_s
        join_s = (self.max_poll_interval_ms + self.session_timeout_ms) / 1000
        return max(self.idle_member_after_s, join_s)

    @property
    def dlq(self) -> str:
        return self.dlq_topic or f"{self.input_topic}.dlq"

    def secret(self, name: Literal["sasl_password", "ssl_key_password"]) -> str | None:
        """A password, from the setting or read from its ``*_file`` (a mounted Kubernetes secret; one trailing
        newline dropped, at most ``SECRET_FILE_MAX_BYTES``). Raises ``ValueError`` naming the file, never the
        secret, when it cannot be read."""
        value: SecretStr | None = getattr(self, name)
        if value is not None:
            return value.get_secret_value()
        path = getattr(self, f"{name}_file")
        if path is None:
            return None
        try:
            with Path(path).open("rb") as f:
                data = f.read(SECRET_FILE_MAX_BYTES + 1)
        except OSError as exc:
            raise ValueError(f"kafka.{name}_file: cannot read {path}: {exc.strerror or exc}") from None
        if len(data) > SECRET_FILE_MAX_BYTES:
            raise ValueError(f"kafka.{name}_file: {path} is over {SECRET_FILE_MAX_BYTES} bytes")
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise ValueError(f"kafka.{name}_file: {path} is not UTF-8 text") from None
        return text[:-1] if text.endswith("\n") else text
