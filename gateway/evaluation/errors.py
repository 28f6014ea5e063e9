"""The evaluation's errors (the run's rows, not the code, are at fault)."""


class EvaluationError(ValueError):
    """A run whose rows cannot be evaluated as the protocol asks, e.g. no generated video paired with an anchor."""
