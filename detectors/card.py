"""Model cards: what a detector expects, what it returns, and how its threshold was set.

A card is stored beside its ONNX file as ``card.yaml``. :func:`check_card_against_model` validates a card
against the graph itself (names, shapes, dtypes) and runs one dummy batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from detectors.errors import CardError, CardFileError
from detectors.thresholds import CARD_THRESHOLD, calibration_id
from transforms.sampling import SamplingPolicy
from transforms.support.config_errors import describe_error, one_line

_STRICT = ConfigDict(extra="forbid", frozen=True)


Layout = Literal["NTHWC", "NCTHW", "NTCHW", "NCHW"]
Channels = tuple[float, float, float]


class InputSpec(BaseModel):
    """The graph's input as it is: layout (``NCHW`` is one frame, scored per frame then aggregated), dtype, and
    the preprocessing a float input expects: x = (pixel [0, 255] * scale - mean) / std per channel, in
    ``channel_order``. The gateway composes a front that turns its uint8 ``[N, T, H, W, 3]`` RGB frames into
    exactly that (:mod:`detectors.compose`)."""

    model_config = _STRICT
    name: str = Field(min_length=1)
    layout: Layout = "NTHWC"
    dtype: Literal["uint8", "float32"] = "uint8"
    scale: float | None = Field(None, gt=0, description="float inputs: multiplies pixels 0..255 (e.g. 1/255)")
    mean: Channels | None = Field(None, description="float inputs: subtracted per channel after scaling")
    std: Channels | None = Field(None, description="float inputs: divides per channel after the mean")
    channel_order: Literal["RGB", "BGR"] = "RGB"
    aggregation: Literal["mean", "max", "topk_mean"] | None = Field(
        None, description="NCHW only: how the per-frame scores of a video become one"
    )
    top_k: int | None = Field(None, ge=1, description="topk_mean: how many of the highest frame scores")

    @field_validator("scale", mode="before")
    @classmethod
    def _fraction(cls, v: object) -> object:
        if isinstance(v, str) and "/" in v:  # "1/255"
            num, den = v.split("/", 1)
            return float(num) / float(den)
        return v

    def problems(self, frames: int) -> list[str]:
        """Everything in this contract that cannot work (the card is refused with all of them)."""
        out = []
        if self.layout == "NCHW" and self.aggregation is None:
            out.append("input.aggregation: a per-frame (NCHW) input needs an aggregation (mean, max or topk_mean)")
        if self.layout != "NCHW" and self.aggregation is not None:
            out.append(f"input.aggregation: only a per-frame (NCHW) input is aggregated, not {self.layout}")
        if (self.aggregation == "topk_mean") != (self.top_k is not None):
            out.append("input.top_k: set it with aggregation topk_mean, and only then")
        elif self.top_k is not None and self.top_k > frames:
            out.append(f"input.top_k: {self.top_k} is more than the {frames} frames sampled")
        if self.dtype == "float32" and (self.mean is None or self.std is None):
            out.append("input.mean/std: a float32 input needs both (e.g. [0, 0, 0] and [1, 1, 1] for none)")
        if self.dtype == "uint8" and (self.scale or self.mean or self.std):
            out.append("input.scale/mean/std: a uint8 input takes raw pixels; normalisation needs float32")
        if self.std is not None and any(v <= 0 for v in self.std):
            out.append("input.std: every value must be positive")
        return out

    @property
    def is_native(self) -> bool:
        """The gateway's own contract: uint8 ``[N, T, H, W, 3]`` RGB, nothing to compose."""
        return self.layout == "NTHWC" and self.dtype == "uint8" and self.channel_order == "RGB"


class OutputSpec(BaseModel):
    """What the graph returns: one score per video (or per frame with NCHW), or two classes."""

    model_config = _STRICT
    name: str = Field(min_length=1)
    direction: Literal["higher_is_generated", "higher_is_real"] = Field(
        description="what a higher native score means; higher_is_real scores are negated by the runtime"
    )
    native_score: str = Field("", description="what the graph computes, in words (e.g. 'std of d2')")
    kind: Literal["score", "logit", "probability", "two_class_logits", "two_class_probabilities"] = "score"
    generated_index: int | None = Field(None, description="two-class outputs: the index of the generated class")

    def problems(self) -> list[str]:
        two = self.kind.startswith("two_class")
        if two and self.generated_index not in (0, 1):
            return [f"output.generated_index: {self.kind} needs the generated class's index, 0 or 1"]
        if not two and self.generated_index is not None:
            return [f"output.generated_index: only two-class outputs have one, not {self.kind}"]
        return []


class RemoteSpec(BaseModel):
    """A model served elsewhere by any Open Inference Protocol (KServe v2) server: Triton, KServe, Seldon
    MLServer. The served model takes the gateway's contract (the composed graph, for a model exported in
    another one)."""

    model_config = _STRICT
    endpoint: str = Field(pattern=r"^(http|https|grpc)://[^/\s]+$", description="e.g. http://kserve:8080")
    model: str = Field(min_length=1, description="the served model's name")
    version: str = Field("", description="the served version; empty: the server's default")
    max_batch: int = Field(8, ge=1, description="most videos in one request")
    timeout_s: float = Field(30.0, gt=0, description="of one request")


class ChatSpec(BaseModel):
    """A multimodal LLM asked through the OpenAI Chat Completions API (vLLM, SGLang, llama.cpp's server, TGI,
    Triton's OpenAI frontend, hosted APIs): the sampled frames go as images, the prompt asks for a verdict, a
    rating or a diagnostic, and the reply is parsed (:mod:`detectors.chat`). No metadata of the video is sent."""

    model_config = _STRICT
    endpoint: str = Field(
        pattern=r"^https?://[^/\s]+(/[^\s]*)?$", description="the API's base URL, e.g. http://127.0.0.1:8000/v1"
    )
    model: str = Field(min_length=1, description="the served model's name, as the server lists it")
    prompt: str = Field(
        "binary", min_length=1, description="a preset (binary, rating, diagnostic) or a template file beside the card"
    )
    api_key_file: str | None = Field(None, description="a file holding the API key (sent as a Bearer token)")
    api_key_env: str | None = Field(None, description="else an environment variable holding it")
    max_concurrency: int = Field(4, ge=1, le=1024, description="requests in flight, across a gateway's workers")
    timeout_s: float = Field(120.0, gt=0, description="of one request")
    retries: int = Field(6, ge=0, le=100, description="tries after the first, of a 429, a 5xx or no answer")
    max_tokens: int = Field(512, ge=1, description="of one reply")
    temperature: float = Field(0.0, ge=0, le=2)
    seed: int | None = Field(None, description="sent where set (servers that take it sample reproducibly)")
    structured: bool = Field(True, description="ask for a JSON-schema response_format; refused: plain text")
    logprobs: bool = Field(True, description="binary: ask for the verdict token's log-probabilities (the score)")
    image_format: Literal["jpeg", "png"] = "jpeg"
    jpeg_quality: int = Field(90, ge=1, le=100)

    @model_validator(mode="after")
    def _one_key_source(self) -> ChatSpec:
        if self.api_key_file and self.api_key_env:
            raise ValueError("chat: name api_key_file or api_key_env, not both")
        return self


# what a chat card need not say: it sends frames, not tensors (RA-Bench's protocol: 16 ordered frames, short side 256)
CHAT_DEFAULTS = {
    "family": "multimodal-llm",
    "input": {"name": "frames"},
    "output": {"name": "reply", "direction": "higher_is_generated", "native_score": "the parsed reply"},
    "sampling": {"mode": "uniform", "frames": 16, "height": 256, "width": 256, "resize": "short_side"},
    "threshold": {
        "value": 50.0,
        "calibration": "rating prompts: a rating of 50 or more is generated; binary and diagnostic prompts decide "
        "by their verdict",
    },
    "training_data": "not stated: a served multimodal model",
    "license": "the served model's",
}


class SourceContract(BaseModel):
    """The user's graph as added: its own contract and sha256, and the sha256 of the composed graph served."""

    model_config = _STRICT
    input: InputSpec
    output: OutputSpec
    sha256: str
    composed_sha256: str


class Recalibration(BaseModel):
    """Where a threshold set by ``lastmile detectors calibrate`` comes from: the run, its real videos on
    ``original``, the RealR asked and the RealR reached there with its Wilson 95% interval, and what it replaced."""

    model_config = _STRICT
    run: str = Field(min_length=1, description="the run's folder, as given")
    results_sha256: str = Field(pattern="^[0-9a-f]{64}$", description="of the run's results.parquet")
    reals: int = Field(ge=1, description="real videos scored on original in the run")
    real_recall: float = Field(ge=0, le=1, description="RealR the threshold gives on those reals")
    interval: tuple[float, float] = Field(description="Wilson 95% interval of that RealR")
    previous: float = Field(allow_inf_nan=False, description="the threshold it replaced")
    at: str = Field(min_length=1, description="when (UTC, ISO 8601)")


class Threshold(BaseModel):
    model_config = _STRICT
    value: float = Field(
        description="decision threshold on the generated-score (after any negation)", allow_inf_nan=False
    )
    calibration: str = Field(min_length=1, description="how the value was set, on which data")
    target_real_recall: float | None = Field(None, gt=0, lt=1)
    recalibrated: Recalibration | None = Field(None, description="set by lastmile detectors calibrate")

    @property
    def id(self) -> str:
        """Which threshold decides: :data:`CARD_THRESHOLD`, or a calibration's ``cal-`` id (of its record: the run,
        its results' sha256, the RealR reached, when), which every score event carries."""
        if self.recalibrated is None:
            return CARD_THRESHOLD
        return calibration_id(self.recalibrated.model_dump_json())


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
    source: SourceContract | None = Field(None, description="set when the served graph was composed")
    remote: RemoteSpec | None = Field(None, description="scored by a remote inference server, not a local graph")
    chat: ChatSpec | None = Field(None, description="a multimodal LLM asked through the Chat Completions API")

    @model_validator(mode="before")
    @classmethod
    def _chat_defaults(cls, raw: object) -> object:
        """A chat card states only what differs from :data:`CHAT_DEFAULTS`."""
        if isinstance(raw, dict) and raw.get("chat") is not None:
            merged = {**CHAT_DEFAULTS, **raw}
            for section in ("sampling", "threshold"):  # (a section given in part keeps the protocol's other keys)
                if isinstance(raw.get(section), dict):
                    merged[section] = {**CHAT_DEFAULTS[section], **raw[section]}
            return merged
        return raw

    @model_validator(mode="after")
    def _contract(self) -> ModelCard:
        problems = self.input.problems(self.sampling.frames) + self.output.problems()
        if self.chat is not None and self.remote is not None:
            problems.append("chat and remote: a detector is asked one way, not both")
        if self.sampling.resize == "short_side" and self.chat is None:
            problems.append("sampling.resize: short_side keeps each video's aspect: only a chat card takes frames of "
                            "varying size")  # fmt: skip
        if self.remote is not None and self.source is None and self.needs_composition:
            problems.append(
                "remote: a served model must take uint8 [N, T, H, W, 3] RGB frames and give one score per video; "
                "serve the composed graph that `lastmile detectors add` writes, with its card"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def served_elsewhere(self) -> bool:
        """Whether a server holds the model (remote, chat): the card is all there is locally."""
        return self.remote is not None or self.chat is not None

    @property
    def needs_composition(self) -> bool:
        """Whether the graph must be composed with a front and tail before the gateway can serve it."""
        return not self.input.is_native or self.output.kind.startswith("two_class")

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
        text = path.read_text()
        raw = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CardFileError(f"cannot read model card {path}: {one_line(exc)}") from exc
    try:
        return ModelCard.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(describe_error(e, str(path), ModelCard, text) for e in exc.errors())
        raise CardFileError(f"invalid model card: {problems}") from exc


def dump_card(card: ModelCard, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(card.model_dump(mode="json"), sort_keys=False))


_ORT_TYPES = {"uint8": "tensor(uint8)", "float32": "tensor(float)"}


def check_card_against_model(card: ModelCard, model_path: str | Path | bytes) -> None:
    """Check the card's input and output against the ONNX graph and run one dummy batch.

    Raises :class:`CardError` naming the mismatch (wrong input name, shape, dtype, missing output).
    """
    import onnxruntime as ort

    try:
        source = model_path if isinstance(model_path, bytes) else str(model_path)
        session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped errors for unreadable graphs
        what = "the composed graph" if isinstance(model_path, bytes) else model_path
        raise CardError(f"{what} is not a loadable ONNX model: {exc}") from exc
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
