"""Serving detectors behind NVIDIA Triton: the model configurations (:mod:`.config`), the bundled local server
(:mod:`.local`) and TensorRT plans (:mod:`.tensorrt`). The client side is :mod:`detectors.runtimes.triton`."""
