"""Bring a detector as it was exported: compose one ONNX graph from a generated front, the user's graph
unchanged, and a generated tail, with ``onnx.compose``, so every runtime (embedded, Triton, remote) serves the
gateway's own contract: uint8 ``[N, T, H, W, 3]`` RGB frames in, one generated-score per video out.

front: Cast to float -> channel order -> x * scale -> (x - mean) / std -> the graph's layout (NCHW: every
       frame of every video as one batch of ``N*T`` images)
tail:  two classes -> one score (logits: logit[generated] - logit[other], the log-odds; probabilities:
       p[generated]) -> per-frame scores -> one per video (mean, max or the mean of the top k)
"""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
from onnx import TensorProto, compose, helper, numpy_helper

from detectors.card import InputSpec, ModelCard, OutputSpec, SourceContract
from detectors.errors import CardError

FRAMES, SCORE = "frames", "score"
PERMS = {"NTHWC": None, "NCTHW": [0, 4, 1, 2, 3], "NTCHW": [0, 1, 4, 2, 3], "NCHW": [0, 1, 4, 2, 3]}


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _const(name: str, value: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def _graph(name: str, nodes, inputs, outputs, like: onnx.ModelProto) -> onnx.ModelProto:
    model = helper.make_model(
        helper.make_graph(nodes, name, inputs, outputs), opset_imports=[helper.make_opsetid("", _opset(like))]
    )
    model.ir_version = like.ir_version
    return model


def front(card: ModelCard, like: onnx.ModelProto) -> onnx.ModelProto:
    """uint8 ``[N, T, H, W, 3]`` RGB frames -> the input the user's graph takes (``front_out``)."""
    spec, s = card.input, card.sampling
    nodes, x = [], FRAMES
    if spec.dtype == "float32":
        nodes.append(helper.make_node("Cast", [x], ["f_cast"], to=TensorProto.FLOAT))
        x = "f_cast"
    if spec.channel_order == "BGR":
        nodes += [
            _const("f_bgr_idx", np.array([2, 1, 0], np.int64)),
            helper.make_node("Gather", [x, "f_bgr_idx"], ["f_bgr"], axis=4),
        ]
        x = "f_bgr"
    if spec.dtype == "float32":
        scale = spec.scale or 1.0
        mean = np.asarray(spec.mean, np.float32)
        std = np.asarray(spec.std, np.float32)
        nodes += [
            _const("f_scale", np.array(scale, np.float32)),
            _const("f_mean", mean),
            _const("f_std", std),
            helper.make_node("Mul", [x, "f_scale"], ["f_scaled"]),
            helper.make_node("Sub", ["f_scaled", "f_mean"], ["f_centred"]),
            helper.make_node("Div", ["f_centred", "f_std"], ["f_norm"]),
        ]
        x = "f_norm"
    if PERMS[spec.layout]:
        nodes.append(helper.make_node("Transpose", [x], ["f_layout"], perm=PERMS[spec.layout]))
        x = "f_layout"
    if spec.layout == "NCHW":
        nodes += [
            _const("f_shape", np.array([-1, 3, s.height, s.width], np.int64)),
            helper.make_node("Reshape", [x, "f_shape"], ["f_frames"]),
        ]
        x = "f_frames"
    nodes.append(helper.make_node("Identity", [x], ["front_out"]))
    dtype = TensorProto.FLOAT if spec.dtype == "float32" else TensorProto.UINT8
    inp = helper.make_tensor_value_info(FRAMES, TensorProto.UINT8, ["N", s.frames, s.height, s.width, 3])
    out = helper.make_tensor_value_info("front_out", dtype, None)
    return _graph("lastmile_front", nodes, [inp], [out], like)


def _reduce(op: str, x: str, out: str, opset: int) -> list[onnx.NodeProto]:
    if opset >= 18:  # axes became an input
        return [
            _const(f"{out}_axes", np.array([1], np.int64)),
            helper.make_node(op, [x, f"{out}_axes"], [out], keepdims=0),
        ]
    return [helper.make_node(op, [x], [out], axes=[1], keepdims=0)]


def tail(card: ModelCard, like: onnx.ModelProto, out_type: int) -> onnx.ModelProto:
    """The user's output -> one generated-score per video (before the card's direction, which runtimes apply)."""
    o, spec, opset = card.output, card.input, _opset(like)
    nodes, x = [], "tail_in"
    if o.kind.startswith("two_class"):
        g = o.generated_index
        nodes += [
            _const("t_pair", np.array([-1, 2], np.int64)),
            helper.make_node("Reshape", [x, "t_pair"], ["t_two"]),
            _const("t_gen", np.array(g, np.int64)),
            helper.make_node("Gather", ["t_two", "t_gen"], ["t_g"], axis=1),
        ]
        if o.kind == "two_class_logits":
            nodes += [
                _const("t_other", np.array(1 - g, np.int64)),
                helper.make_node("Gather", ["t_two", "t_other"], ["t_o"], axis=1),
                helper.make_node("Sub", ["t_g", "t_o"], ["t_one"]),
            ]
            x = "t_one"
        else:
            x = "t_g"
    nodes += [_const("t_flat", np.array([-1], np.int64)), helper.make_node("Reshape", [x, "t_flat"], ["t_scores"])]
    x = "t_scores"
    if out_type != TensorProto.FLOAT:
        nodes.append(helper.make_node("Cast", [x], ["t_float"], to=TensorProto.FLOAT))
        x = "t_float"
    if spec.layout == "NCHW":
        nodes += [
            _const("t_video", np.array([-1, card.sampling.frames], np.int64)),
            helper.make_node("Reshape", [x, "t_video"], ["t_per_frame"]),
        ]
        if spec.aggregation == "topk_mean":
            nodes += [
                _const("t_k", np.array([spec.top_k], np.int64)),
                helper.make_node("TopK", ["t_per_frame", "t_k"], ["t_top", "t_top_idx"], axis=1),
            ]
            nodes += _reduce("ReduceMean", "t_top", "t_agg", opset)
        else:
            nodes += _reduce("ReduceMean" if spec.aggregation == "mean" else "ReduceMax", "t_per_frame", "t_agg", opset)
        x = "t_agg"
    nodes.append(helper.make_node("Identity", [x], [SCORE]))
    inp = helper.make_tensor_value_info("tail_in", out_type, None)
    out = helper.make_tensor_value_info(SCORE, TensorProto.FLOAT, ["N"])
    return _graph("lastmile_tail", nodes, [inp], [out], like)


def graph_problems(card: ModelCard, model: onnx.ModelProto) -> list[str]:
    """Where the card's contract does not fit the graph: every problem, not the first."""
    spec, o, s = card.input, card.output, card.sampling
    inputs = {i.name: i for i in model.graph.input}
    outputs = {i.name: i for i in model.graph.output}
    out = []
    if spec.name not in inputs:
        out.append(f"input {spec.name!r} is not in the graph (graph inputs: {sorted(inputs)})")
    else:
        t = inputs[spec.name].type.tensor_type
        want_type = TensorProto.FLOAT if spec.dtype == "float32" else TensorProto.UINT8
        if t.elem_type != want_type:
            out.append(
                f"input {spec.name!r}: the card says {spec.dtype}, the graph takes "
                f"{TensorProto.DataType.Name(t.elem_type).lower()}"
            )
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        want = input_dims(spec, s)
        if len(dims) != len(want):
            out.append(
                f"input {spec.name!r}: layout {spec.layout} is rank {len(want)}, the graph's input is rank "
                f"{len(dims)} ({_show(dims)})"
            )
        else:
            for axis, (g, w) in enumerate(zip(dims, want, strict=True)):
                if g is not None and w is not None and g != w:
                    out.append(
                        f"input {spec.name!r} axis {axis} ({spec.layout[axis]}): the card implies {w}, "
                        f"the graph has {g}"
                    )
    if o.name not in outputs:
        out.append(f"output {o.name!r} is not in the graph (graph outputs: {sorted(outputs)})")
    elif o.kind.startswith("two_class"):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in outputs[o.name].type.tensor_type.shape.dim]
        if dims and dims[-1] is not None and (dims[-1] != 2 or (o.generated_index or 0) >= dims[-1]):
            out.append(
                f"output {o.name!r}: {o.kind} with generated_index {o.generated_index}, but the graph's "
                f"last axis has {dims[-1]} classes"
            )
    return out


def input_dims(spec: InputSpec, s) -> list[int | None]:
    """The graph input's dims a card's layout and sampling imply (None: the batch, any size)."""
    return {
        "NTHWC": [None, s.frames, s.height, s.width, 3],
        "NCTHW": [None, 3, s.frames, s.height, s.width],
        "NTCHW": [None, s.frames, 3, s.height, s.width],
        "NCHW": [None, 3, s.height, s.width],
    }[spec.layout]


def _show(dims: list) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def compose_model(model: onnx.ModelProto, card: ModelCard) -> tuple[onnx.ModelProto, ModelCard]:
    """The composed graph (uint8 NTHWC in, ``score`` out) and its card, which keeps the user's contract as
    ``source`` with both graphs' sha256. Raises :class:`CardError` listing every problem."""
    problems = graph_problems(card, model)
    if problems:
        raise CardError(f"the card does not fit {card.name}'s graph: " + "; ".join(problems))
    user = compose.add_prefix(model, "user_")
    out_type = next(o for o in user.graph.output if o.name == "user_" + card.output.name).type.tensor_type.elem_type
    head = front(card, user)
    merged = compose.merge_models(
        head, user, io_map=[("front_out", "user_" + card.input.name)], outputs=["user_" + card.output.name]
    )
    merged = compose.merge_models(merged, tail(card, user, out_type), io_map=[("user_" + card.output.name, "tail_in")])
    onnx.checker.check_model(merged)
    composed_card = card.model_copy(
        update={
            "input": InputSpec(name=FRAMES),
            "output": OutputSpec(name=SCORE, direction=card.output.direction, native_score=_meaning(card)),
            "source": SourceContract(
                input=card.input,
                output=card.output,
                sha256=hashlib.sha256(model.SerializeToString()).hexdigest(),
                composed_sha256=hashlib.sha256(merged.SerializeToString()).hexdigest(),
            ),
        }
    )
    return merged, composed_card


def _meaning(card: ModelCard) -> str:
    o, spec = card.output, card.input
    names = {"two_class_logits": "log-odds", "two_class_probabilities": "probability"}
    what = f"{names[o.kind]} of class {o.generated_index}" if o.kind in names else (o.native_score or o.kind)
    if spec.layout == "NCHW":
        agg = f"mean of the top {spec.top_k}" if spec.aggregation == "topk_mean" else spec.aggregation
        return f"{agg} over frames of the per-frame {what}"
    return what
