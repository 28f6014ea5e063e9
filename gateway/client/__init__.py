"""The clients of a running gateway, beneath the use cases that talk to one: sending videos to its input topic
(:mod:`~gateway.client.send`: ``lastmile send``, the monitor's canary, the replay via Kafka) and following its
score events (:mod:`~gateway.client.follow`: ``lastmile scores``)."""
