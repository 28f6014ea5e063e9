"""Model cards: what a detector expects, what it returns, and how its threshold was set.

A card is stored beside its ONNX file as ``card.yaml``. :func:`check_card_against_model` validates a card
against the graph itself (names, shapes, dtypes) and runs one dummy batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from detectors.errors import CardError
from transforms.sampling import SamplingPolicy

_STRICT = ConfigDict(extra="forbid", frozen=True)


class InputSpec(BaseModel):
    model_config = _STRICT
    name: str = Field(min_length=1)
    layout: Literal["NTHWC"] = "NTHWC"
    dtype: Literal["uint8", "float32"] = "uint8"


class OutputSpec(BaseModel):
    model_config = _STRICT
    name: str = Field(min_length=1)
    direction: Literal["higher_is_generated", "higher_is_real"] = Field(
        description="what a higher native score means; higher_is_real scores are negated by the runtime"
    )
    native_score: str = Field("", description="what the graph computes, in words (e.g. 'std of d2')")


class Threshold(BaseModel):
    model_config = _STRICT
    value: float = Field(description="decision threshold on the generated-score (after any negation)")
    calibration: str = Field(min_length=1, description="how the value was set, on which data")
    target_real_recall: float | None = Field(None, gt=0, lt=1)


class ModelCard(BaseModel):
    """Everything the gateway needs to run a detector and to report on it honestly."""

    model_config = _STRICT
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]{0,63}$")
    version: str = Field(min_length=1)
    family: str = Field(min_length=1)
    description: str = ""
    input: InputSpec
    sampling: SamplingPolicy
    output: OutputSpec
    threshold: Threshold
    training_data: str = Field(min_length=1)
    license: str = Field(min_length=1)
    reference: str = ""
    notes: str = ""

    @field_validator("version")
    @classmethod
    def _no_spaces(cls, v: str) -> str:
        if any(c.isspace() for c in v):
            raise ValueError("version must not contain spaces")
        return v

    def input_shape(self, batch: int = 1) -> tuple[int, int, int, int, int]:
        s = self.sampling
        return (batch, s.frames, s.height, s.width, 3)

    def generated_score(self, native: np.ndarray) -> np.ndarray:
        """Native graph output -> the gateway's convention (higher = more likely generated)."""
        native = np.asarray(native, dtype=np.float64).reshape(-1)
        return native if self.output.direction == "higher_is_generated" else -native


def load_card(path: str | Path) -> ModelCard:
    """Read a card from YAML or JSON; raise :class:`CardError` with every problem listed."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CardError(f"cannot read model card {path}: {exc}") from exc
    try:
        return ModelCard.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<card>'}: {e['msg']}" for e in exc.errors())
        raise CardError(f"invalid model card {path}: {problems}") from exc


def dump_card(card: ModelCard, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(card.model_dump(mode="json"), sort_keys=False))


_ORT_TYPES = {"uint8": "tensor(uint8)", "float32": "tensor(float)"}


def check_card_against_model(card: ModelCard, model_path: str | Path) -> None:
    """Check the card's input and output against the ONNX graph and run one dummy batch.

    Raises :class:`CardError` naming the mismatch (wrong input name, shape, dtype, missing output).
    """
    import onnxruntime as ort

    try:
        session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped errors for unreadable graphs
        raise CardError(f"{model_path} is not a loadable ONNX model: {exc}") from exc
    inputs = {i.name: i for i in session.get_inputs()}
    if card.input.name not in inputs:
        raise CardError(f"card input {card.input.name!r} is not in the graph (graph inputs: {sorted(inputs)})")
    graph_in = inputs[card.input.name]
    if graph_in.type != _ORT_TYPES[card.input.dtype]:
        raise CardError(f"input {card.input.name!r}: card says {card.input.dtype}, graph has {graph_in.type}")
    want = card.input_shape()
    if len(graph_in.shape) != len(want):
        raise CardError(f"input {card.input.name!r}: card shape {want[1:]} (rank 5), graph shape {graph_in.shape}")
    for axis, (g, c) in enumerate(zip(graph_in.shape[1:], want[1:], strict=True), start=1):
        if isinstance(g, int) and g != c:
            raise CardError(f"input {card.input.name!r} axis {axis}: card says {c}, graph has {g}")
    outputs = {o.name for o in session.get_outputs()}
    if card.output.name not in outputs:
        raise CardError(f"card output {card.output.name!r} is not in the graph (graph outputs: {sorted(outputs)})")
    dummy = np.zeros(card.input_shape(2), dtype=card.input.dtype)
    try:
        (out,) = session.run([card.output.name], {card.input.name: dummy})
    except Exception as exc:
        raise CardError(f"a dummy batch of shape {dummy.shape} failed: {exc}") from exc
    if np.asarray(out).reshape(-1).shape != (2,):
        raise CardError(f"output {card.output.name!r} must give one score per video, got shape {np.shape(out)}")
