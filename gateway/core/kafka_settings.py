"""Where a service meets Kafka: the broker, topics, consumer group, security and record limits (the gateway's
``kafka:`` block; the monitor's extends it). Kept apart from the pipeline's settings so that a service reading
only Kafka (the monitor, the bus) does not import the transforms."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


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

    @property
    def joining_after_s(self) -> float:
        """How long a member still joining its group may hold nothing while the group's records wait: the setting,
        else the longer of ``idle_member_after_s`` and what a join may take (the group waits up to a rebalance
        timeout, kafka-python's ``max_poll_interval_ms``, for its members; a member's session more for one
        that died)."""
        if self.joining_member_after_s is not None:
            return self.joining_member_after_s
        join_s = (self.max_poll_interval_ms + self.session_timeout_ms) / 1000
        return max(self.idle_member_after_s, join_s)

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
