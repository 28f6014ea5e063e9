"""The moderation tap: the Kafka gateway service (poll loop, offsets, publishing, dead letters), its live
metrics and its HTTP endpoints, and the local broker for development and tests."""
