"""kafka-python's clients, built from the project's settings. Only the bus holds them: everything else gets the
wrappers of :mod:`gateway.bus.consumer`, :mod:`gateway.bus.producer` and :mod:`gateway.bus.admin`."""

from __future__ import annotations

from gateway.bus.records import Partition
from gateway.core.kafka_settings import KafkaSettings

FETCH_HEADROOM_BYTES = 1024 * 1024  # a fetch or request holds a record of max_message_bytes plus its framing
ADMIN_TIMEOUT_MS = 5000


def admin_client(settings: KafkaSettings):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(**settings.client_options(), request_timeout_ms=ADMIN_TIMEOUT_MS)


def producer_client(settings: KafkaSettings):
    """Every send acknowledged by all replicas; a broker that does not answer fails a send within
    ``request_timeout_ms`` (and blocks a send at most ``max_block_ms``), so the caller stays responsive."""
    from kafka import KafkaProducer

    return KafkaProducer(
        **settings.client_options(),
        acks="all",
        linger_ms=5,
        max_request_size=settings.max_message_bytes + FETCH_HEADROOM_BYTES,
        retries=5,
        request_timeout_ms=settings.request_timeout_ms,
        max_block_ms=settings.max_block_ms,
    )


def consumer_client(settings: KafkaSettings):
    """A member of ``settings.group_id``: manual commits, from the earliest offset of a new group."""
    from kafka import KafkaConsumer

    _register_listener()
    return KafkaConsumer(
        **settings.client_options(),
        group_id=settings.group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_interval_ms=settings.max_poll_interval_ms,
        session_timeout_ms=settings.session_timeout_ms,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        max_poll_records=settings.max_poll_records,
        partition_assignment_strategy=eager_assignors(),
        request_timeout_ms=max(settings.request_timeout_ms, settings.session_timeout_ms + 1000),
        fetch_max_bytes=settings.max_message_bytes + FETCH_HEADROOM_BYTES,
        max_partition_fetch_bytes=settings.max_message_bytes + FETCH_HEADROOM_BYTES,
        # the largest response it reads: a bigger batch (broker-side, KIP-74) is passed by gateway.bus.stalls
        receive_message_max_bytes=settings.max_message_bytes + 2 * FETCH_HEADROOM_BYTES,
    )


def eager_assignors() -> tuple:
    """kafka-python's default assignors, named so that no new default changes them under the bus. They are eager:
    a member revokes every partition before each join, which :attr:`gateway.bus.Consumer.joined` counts on (with a
    cooperative one it revokes only the partitions that move, and a joining member would look joined)."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    return (RangePartitionAssignor, RoundRobinPartitionAssignor)


def reader_client(settings: KafkaSettings):
    """No group and no commits: for a reader that assigns partitions and seeks itself."""
    from kafka import KafkaConsumer

    return KafkaConsumer(
        **settings.client_options(),
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=settings.request_timeout_ms,
        max_poll_records=settings.max_poll_records,
    )


def to_client(partition: Partition):
    """kafka-python's ``TopicPartition`` for one of ours (its methods check the type)."""
    from kafka import TopicPartition

    return TopicPartition(partition.topic, partition.partition)


def _register_listener() -> None:
    """kafka-python's ``subscribe`` takes only its ``ConsumerRebalanceListener``: register the bus's
    :class:`~gateway.bus.rebalance.Rebalance` as one (an ABC's virtual subclass; no kafka type in its bases)."""
    from kafka import ConsumerRebalanceListener

    from gateway.bus.rebalance import Rebalance

    ConsumerRebalanceListener.register(Rebalance)
