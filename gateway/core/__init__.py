"""The vocabulary every use shares: configuration, messages, the platform's input mapping, sources, contenders,
metric names and wording. The scoring engine that speaks it is :mod:`gateway.scoring`."""
