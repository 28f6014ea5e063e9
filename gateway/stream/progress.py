"""Whether the gateway's input moves (readiness is progress): the input partitions it holds that stall
(:mod:`gateway.stream.stalls`) and, holding none, a group backlog that no member commits past
(:mod:`gateway.stream.membership`). Either makes the gateway not ready and says why."""

from __future__ import annotations

import logging

from gateway import bus
from gateway.core.kafka_settings import KafkaSettings
from gateway.stream.live import LiveMetrics
from gateway.stream.membership import IdleWatch, Unassigned, backlog
from gateway.stream.stalls import Stall, Watch

log = logging.getLogger("lastmile.gateway")


class Progress:
    def __init__(self, settings: KafkaSettings, metrics: LiveMetrics) -> None:
        self.settings, self.metrics = settings, metrics
        self.watch = Watch(settings)
        self.stalls: list[Stall] = []  # input partitions with lag that have not moved (kafka.stall_after_s)
        self.unassigned: Unassigned | None = None  # no input partition while the group's backlog waits
        self.idle = IdleWatch(
            settings.input_topic, settings.group_id, settings.idle_member_after_s, settings.joining_after_s
        )

    def observe(self, consumer: bus.Consumer) -> None:
        """After each poll: the stall watch notes the positions (:meth:`gateway.stream.stalls.Watch.observe`)."""
        self.watch.observe(consumer)

    def check(self, consumer: bus.Consumer) -> None:
        """Stalls, the consumer lag and (holding no input partition) the group's backlog; raises
        :class:`~gateway.bus.BusError` when the broker does not answer the end offsets request."""
        k = self.settings
        stalls = self.watch.stalls(k.stall_after_s, consumer.stall_cause)
        self.stalls = [s for s in stalls if s.partition.topic == k.input_topic]
        self.metrics.stalled.set(len(self.stalls))
        for stall in self.stalls:
            log.error("not ready: %s", stall)
        lag = consumer.lag(k.input_topic, k.probe_timeout_ms)
        if lag is not None:
            self.metrics.lag.set(lag)
        try:
            waiting = None if lag is not None else backlog(consumer, k.input_topic, k.probe_timeout_ms)
        except bus.BusError as exc:  # e.g. no group coordinator yet: the lag above says whether the broker answers
            log.warning("the group's backlog on %s unknown this round: %s", k.input_topic, exc)
            return
        self.unassigned = self.idle.observe(waiting, consumer.joined)
        if self.unassigned is not None:
            log.error("not ready: %s", self.unassigned)

    @property
    def stuck(self) -> bool:
        return bool(self.stalls) or self.unassigned is not None

    def reasons(self) -> list[str]:
        """What of it keeps the gateway from being ready, in words (for ``/readyz``)."""
        return [str(s) for s in self.stalls] + ([str(self.unassigned)] if self.unassigned is not None else [])
