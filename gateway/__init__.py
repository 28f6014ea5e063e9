"""lastmile-gateway: the service, Kafka I/O, pipeline, metrics, CLI, replay and reports."""

VERSION = "0.1.0"
__version__ = VERSION
