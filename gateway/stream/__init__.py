"""The moderation tap: the Kafka gateway service (poll loop, offsets, publishing, dead letters), its live
metrics and its HTTP endpoints (Kafka itself is reached through :mod:`gateway.bus`)."""
