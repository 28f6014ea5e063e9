"""A small builder for hand-written ONNX graphs (opset 17), used by the reference detectors.

Writing the graphs directly keeps every preprocessing step inside the model, needs no exporter, and makes
the graph read like the paper's formula.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class GraphBuilder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._ids = itertools.count()

    def _fresh(self, hint: str) -> str:
        return f"{hint}_{next(self._ids)}"

    def const(self, value: np.ndarray | float | list, hint: str = "c", dtype: type = np.float32) -> str:
        name = self._fresh(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def ints(self, values: list[int] | tuple[int, ...], hint: str = "i") -> str:
        return self.const(list(values), hint, np.int64)

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs: object) -> str:
        output = out or self._fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], **attrs))
        return output

    def build(self, input_name: str, input_shape: list, input_type: int, output: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes,
            self.name,
            [helper.make_tensor_value_info(input_name, input_type, input_shape)],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["N"])],
            initializer=self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="lastmile")
        model.ir_version = 8
        onnx.checker.check_model(model, full_check=True)
        return model

    # -- shared pieces ------------------------------------------------------------------------------
    def frames_to_float(self, x: str) -> str:
        """uint8 [N,T,H,W,3] -> float32 in [0, 1]."""
        return self.op("Div", self.op("Cast", x, to=TensorProto.FLOAT), self.const(255.0))

    def grey(self, x: str) -> str:
        """float [..., 3] RGB -> [...] luma (BT.601 weights), the grey image of Durall et al."""
        w = self.const(np.array([0.299, 0.587, 0.114], np.float32))
        return self.op("ReduceSum", self.op("Mul", x, w), self.ints([-1]), keepdims=0)


def uint8_video_input(frames: int, height: int, width: int) -> list:
    return ["N", frames, height, width, 3]
