"""Triton python-backend model: runs the ``model.onnx`` beside this file with onnxruntime on the CPU.

Generated into each ``triton_models/<name>/1/model.py`` by ``lastmile triton repo``; used with the local
config (``--model-config-name local``) by the Triton that the nvidia-pytriton wheel ships (python backend only).
Production configs run the same ONNX file with the onnxruntime (and TensorRT) backends instead.
"""

import json
import os

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.input = config["input"][0]["name"]
        self.output = config["output"][0]["name"]
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(os.environ.get("LASTMILE_TRITON_THREADS", "1"))
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def execute(self, requests):
        responses = []
        for request in requests:
            # DLPack both ways: the stubs in nvidia-pytriton 0.7 were built against NumPy 1, and with NumPy 2
            # installed their numpy conversion silently returns empty tensors (measured); DLPack does not use it
            frames = np.from_dlpack(pb_utils.get_input_tensor_by_name(request, self.input))
            try:
                (scores,) = self.session.run([self.output], {self.input: frames})
            except Exception as exc:  # a malformed request: an error for this request only
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
                continue
            out = np.ascontiguousarray(np.asarray(scores, dtype=np.float32).reshape(-1))
            # with NumPy 2 the stub logs a capsule-destructor error here, once per request; the scores are right
            tensor = pb_utils.Tensor.from_dlpack(self.output, out.__dlpack__())
            responses.append(pb_utils.InferenceResponse([tensor]))
        return responses
