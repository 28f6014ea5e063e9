"""What every use shares: configuration, messages, sources, and the pipeline (decode -> conditions -> frames ->
scores -> rows) with the one worker entry point that the replay and the Kafka service both call."""
