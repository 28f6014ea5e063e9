"""LastMile dissemination conditions, produced in memory on PyAV.

Public entry points: :class:`transforms.engine.Engine`, :data:`transforms.spec.LASTMILE`,
:func:`transforms.sampling.sample_frames` and the errors in :mod:`transforms.errors`.
"""
