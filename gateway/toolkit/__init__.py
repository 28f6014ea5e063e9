"""What every long-running service of the project is built from, beneath the tap (:mod:`gateway.stream`), the
monitor (:mod:`gateway.monitor`) and the replay (:mod:`gateway.batch`), which stand side by side above it and
import none of each other: the HTTP endpoints (:mod:`~gateway.toolkit.http`: health, readiness, metrics, pages),
readiness that reports progress (:mod:`~gateway.toolkit.health`) and the local Tansu broker
(:mod:`~gateway.toolkit.tansu`: ``lastmile kafka up``, ``lastmile up``, the replay via Kafka, the tests)."""
