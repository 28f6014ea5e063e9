"""librdkafka's error codes, each given its project class once (as httpx maps httpcore's errors). Every code
librdkafka defines is named here: ``tests/test_bus_errors.py`` fails on one that is not, so a client upgrade
that adds codes makes someone decide what each means for the tap (retry later, drop the commit, refuse the
record, or stop).

The names are ``confluent_kafka.KafkaError``'s attributes: broker codes as Kafka names them, librdkafka's own
(local) ones with a leading underscore."""

from __future__ import annotations

from gateway.bus.errors import (
    AccessDenied,
    BrokerUnavailable,
    BusError,
    ClientConfigError,
    CommitFailed,
    CorruptBatch,
    NoAnswer,
    RecordTooLarge,
    UnknownTopic,
)

# Worth trying again later: nothing answered, or the cluster is moving (a leader, a coordinator, a broker).
UNAVAILABLE = frozenset(
    {
        "BROKER_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "CONCURRENT_TRANSACTIONS",
        "ELIGIBLE_LEADERS_NOT_AVAILABLE",
        "FENCED_LEADER_EPOCH",
        "FETCH_SESSION_ID_NOT_FOUND",
        "INVALID_FETCH_SESSION_EPOCH",
        "KAFKA_STORAGE_ERROR",
        "LEADER_NOT_AVAILABLE",
        "LISTENER_NOT_FOUND",
        "NETWORK_EXCEPTION",
        "NOT_CONTROLLER",
        "NOT_COORDINATOR",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "NOT_LEADER_FOR_PARTITION",
        "OFFSET_NOT_AVAILABLE",
        "PREFERRED_LEADER_NOT_AVAILABLE",
        "REBOOTSTRAP_REQUIRED",
        "REPLICA_NOT_AVAILABLE",
        "THROTTLING_QUOTA_EXCEEDED",
        "UNKNOWN_LEADER_EPOCH",
        "UNSTABLE_OFFSET_COMMIT",
        "STALE_BROKER_EPOCH",
        "_ALL_BROKERS_DOWN",
        "_DESTROY_BROKER",
        "_IN_PROGRESS",
        "_ISR_INSUFF",
        "_NODE_UPDATE",
        "_OUTDATED",
        "_PARTIAL",
        "_PREV_IN_PROGRESS",
        "_PURGE_INFLIGHT",
        "_PURGE_QUEUE",
        "_QUEUE_FULL",
        "_RESOLVE",
        "_RETRY",
        "_TRANSPORT",
        "_UNKNOWN_BROKER",
        "_WAIT_CACHE",
        "_WAIT_COORD",
    }
)

# Nothing answered in time (a frozen or overloaded broker), rather than a refusal or a cut connection.
TIMED_OUT = frozenset({"REQUEST_TIMED_OUT", "_MSG_TIMED_OUT", "_TIMED_OUT", "_TIMED_OUT_QUEUE"})

# The group moved on before a commit landed: the partitions' next owner redelivers.
COMMIT = frozenset(
    {
        "FENCED_INSTANCE_ID",
        "FENCED_MEMBER_EPOCH",
        "GROUP_MAX_SIZE_REACHED",
        "ILLEGAL_GENERATION",
        "INVALID_COMMIT_OFFSET_SIZE",
        "MEMBER_ID_REQUIRED",
        "REBALANCE_IN_PROGRESS",
        "STALE_MEMBER_EPOCH",
        "UNKNOWN_MEMBER_ID",
        "UNRELEASED_INSTANCE_ID",
        "_ASSIGNMENT_LOST",
        "_MAX_POLL_EXCEEDED",
        "_NO_OFFSET",
        "_ASSIGN_PARTITIONS",
        "_REVOKE_PARTITIONS",
        "_STATE",
    }
)

TOO_LARGE = frozenset(
    {
        "INVALID_MSG_SIZE",
        "MSG_SIZE_TOO_LARGE",
        "OFFSET_METADATA_TOO_LARGE",
        "RECORD_LIST_TOO_LARGE",
        "TELEMETRY_TOO_LARGE",
    }
)

UNKNOWN_TOPIC = frozenset(
    {"UNKNOWN_TOPIC_ID", "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "INCONSISTENT_TOPIC_ID"}
)

CORRUPT = frozenset(
    {
        "INVALID_MSG",
        "INVALID_RECORD",
        "_BAD_COMPRESSION",
        "_BAD_MSG",
        "_UNDERFLOW",
        "UNSUPPORTED_COMPRESSION_TYPE",
        "_VALUE_DESERIALIZATION",
        "_KEY_DESERIALIZATION",
        "_INVALID_DIFFERENT_RECORD",
    }
)

DENIED = frozenset(
    {
        "CLUSTER_AUTHORIZATION_FAILED",
        "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
        "DELEGATION_TOKEN_AUTH_DISABLED",
        "DELEGATION_TOKEN_EXPIRED",
        "DELEGATION_TOKEN_NOT_FOUND",
        "DELEGATION_TOKEN_OWNER_MISMATCH",
        "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
        "GROUP_AUTHORIZATION_FAILED",
        "ILLEGAL_SASL_STATE",
        "PRINCIPAL_DESERIALIZATION_FAILURE",
        "SASL_AUTHENTICATION_FAILED",
        "TOPIC_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "UNACCEPTABLE_CREDENTIAL",
        "UNSUPPORTED_SASL_MECHANISM",
        "SECURITY_DISABLED",
        "_AUTHENTICATION",
        "_SSL",
    }
)

CONFIG = frozenset(
    {
        "INVALID_CONFIG",
        "INVALID_GROUP_ID",
        "INVALID_SESSION_TIMEOUT",
        "INCONSISTENT_GROUP_PROTOCOL",
        "UNSUPPORTED_ASSIGNOR",
        "INVALID_REQUIRED_ACKS",
        "INVALID_TRANSACTION_TIMEOUT",
        "INVALID_REPLICATION_FACTOR",
        "INVALID_PARTITIONS",
        "INVALID_REPLICA_ASSIGNMENT",
        "INVALID_REGULAR_EXPRESSION",
        "_INVALID_ARG",
        "_INVALID_TYPE",
        "_NOT_CONFIGURED",
        "_UNKNOWN_PROTOCOL",
        "_UNSUPPORTED_FEATURE",
        "_NOT_IMPLEMENTED",
        "UNSUPPORTED_VERSION",
        "UNSUPPORTED_FOR_MESSAGE_FORMAT",
        "_FS",
    }
)

# Everything else: a plain BusError (the client or broker failed in a way the tap has no special answer for).
OTHER = frozenset(
    {
        "DUPLICATE_RESOURCE",
        "DUPLICATE_SEQUENCE_NUMBER",
        "DUPLICATE_VOTER",
        "ELECTION_NOT_NEEDED",
        "FEATURE_UPDATE_FAILED",
        "FENCED_STATE_EPOCH",
        "GROUP_ID_NOT_FOUND",
        "GROUP_SUBSCRIBED_TO_TOPIC",
        "INCONSISTENT_VOTER_SET",
        "INVALID_PRINCIPAL_TYPE",
        "INVALID_PRODUCER_EPOCH",
        "INVALID_PRODUCER_ID_MAPPING",
        "INVALID_RECORD_STATE",
        "INVALID_REGISTRATION",
        "INVALID_REQUEST",
        "INVALID_SHARE_SESSION_EPOCH",
        "INVALID_TIMESTAMP",
        "INVALID_TXN_STATE",
        "INVALID_UPDATE_VERSION",
        "INVALID_VOTER_KEY",
        "LOG_DIR_NOT_FOUND",
        "MISMATCHED_ENDPOINT_TYPE",
        "NON_EMPTY_GROUP",
        "NO_ERROR",
        "NO_REASSIGNMENT_IN_PROGRESS",
        "OFFSET_OUT_OF_RANGE",
        "OPERATION_NOT_ATTEMPTED",
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "POLICY_VIOLATION",
        "PRODUCER_FENCED",
        "REASSIGNMENT_IN_PROGRESS",
        "RESOURCE_NOT_FOUND",
        "SHARE_SESSION_LIMIT_REACHED",
        "SHARE_SESSION_NOT_FOUND",
        "STALE_CTRL_EPOCH",
        "STREAMS_INVALID_TOPOLOGY",
        "STREAMS_INVALID_TOPOLOGY_EPOCH",
        "STREAMS_TOPOLOGY_FENCED",
        "TOPIC_ALREADY_EXISTS",
        "TOPIC_DELETION_DISABLED",
        "TOPIC_EXCEPTION",
        "TRANSACTION_ABORTABLE",
        "TRANSACTION_COORDINATOR_FENCED",
        "UNKNOWN",
        "UNKNOWN_CONTROLLER_ID",
        "UNKNOWN_PRODUCER_ID",
        "UNKNOWN_SUBSCRIPTION_ID",
        "UNSUPPORTED_ENDPOINT_TYPE",
        "VOTER_NOT_FOUND",
        "_APPLICATION",
        "_AUTO_OFFSET_RESET",
        "_CONFLICT",
        "_CRIT_SYS_RESOURCE",
        "_DESTROY",
        "_EXISTING_SUBSCRIPTION",
        "_FAIL",
        "_FATAL",
        "_FENCED",
        "_GAPLESS_GUARANTEE",
        "_INCONSISTENT",
        "_INTR",
        "_KEY_SERIALIZATION",
        "_LOG_TRUNCATION",
        "_NOENT",
        "_NOOP",
        "_PARTITION_EOF",
        "_READ_ONLY",
        "_UNKNOWN_GROUP",
        "_VALUE_SERIALIZATION",
    }
)

CLASSES: dict[type[BusError], frozenset[str]] = {
    NoAnswer: TIMED_OUT,
    BrokerUnavailable: UNAVAILABLE,
    CommitFailed: COMMIT,
    RecordTooLarge: TOO_LARGE,
    UnknownTopic: UNKNOWN_TOPIC,
    CorruptBatch: CORRUPT,
    AccessDenied: DENIED,
    ClientConfigError: CONFIG,
    BusError: OTHER,
}
BY_NAME: dict[str, type[BusError]] = {name: kind for kind, names in CLASSES.items() for name in names}


def kind_of(name: str, retriable: bool = False) -> type[BusError]:
    """The project's class for a librdkafka error code by name. A code librdkafka added after this table was
    written is :class:`BrokerUnavailable` when librdkafka says it is retriable, else a plain :class:`BusError`
    (the test on the table fails until it is named)."""
    found = BY_NAME.get(name)
    if found is not None:
        return found
    return BrokerUnavailable if retriable else BusError
