"""lastmile-gateway: the service, Kafka I/O, pipeline, metrics, CLI, replay and reports."""

__version__ = "0.1.0"
