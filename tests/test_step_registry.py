"""A step kind is one registered unit: a kind declared here, in the test module alone (a horizontal flip), runs
through the spec, the engine, the ffmpeg-CLI cross-check and the floor, and is gone again once unregistered."""

from __future__ import annotations

from typing import Literal

import av
import pytest
from pydantic import ValidationError

from tests.support.media import decode_gray, make_clip, psnr
from transforms import ffmpeg_cli
from transforms.catalog import load_conditions_file
from transforms.engine import Engine
from transforms.errors import SpecError
from transforms.floor import floor_steps, measure_floor
from transforms.nodes import FilterNode
from transforms.spec import LASTMILE, PROFILES, Condition, spec_hash
from transforms.steps.kind import CliChain, CliEquivalent, NodeContext, StepKind, StepSpec, filter_alone
from transforms.steps.registry import STEPS

FAST = PROFILES["throughput"].with_determinism(True)
BUILT_IN_TAGS = "'vp9', 'scale', 'fps', 'badge', 'h264', 'trim', 'speed', 'reorder'"
MIRRORED = {"name": "mirrored", "steps": [{"kind": "vp9"}, {"kind": "hflip"}, {"kind": "h264"}]}


class HflipStep(StepSpec):
    """Mirror every frame left to right."""

    kind: Literal["hflip"] = "hflip"


class HflipNode(FilterNode):
    def __init__(self) -> None:
        super().__init__("hflip")

    def filters(self, frame: av.VideoFrame) -> list[tuple[str, str]]:
        return [("hflip", "")]


def _hflip_cli(step: HflipStep, chain: CliChain) -> CliChain:
    return chain.filtered(chain.stream.filter("hflip"))


def _hflip_node(step: HflipStep, ctx: NodeContext) -> HflipNode:
    return HflipNode()


class UntaggedStep(StepSpec):
    kind: str = "untagged"


HFLIP = StepKind(model=HflipStep, node=_hflip_node, cli=CliEquivalent(_hflip_cli), floor=filter_alone(_hflip_cli))


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> bytes:
    return make_clip(tmp_path_factory.mktemp("hflip"), "basic.mp4")


@pytest.fixture
def hflip():
    with STEPS.registered(HFLIP):
        yield Condition.model_validate(MIRRORED)


def test_a_registered_kind_runs_through_the_engine_and_agrees_with_the_ffmpeg_cli(hflip, clip):
    transcode = next(c for c in LASTMILE if c.name == "transcode")
    ours = Engine(FAST).run(clip, [transcode, hflip])
    mirrored, plain = (decode_gray(ours.variants[n].data) for n in ("mirrored", "transcode"))
    assert mirrored.shape == plain.shape
    # the transcode mirrored, within the noise of two H.264 encodes; far from the transcode as it is
    assert psnr(mirrored, plain[:, :, ::-1]) > 30 > 15 > psnr(mirrored, plain)
    meta = ours.variants["mirrored"].meta
    assert [s.kind for s in meta.steps] == ["normalize", "vp9", "hflip", "h264"]
    assert meta.codec_chain == ["h264", "libvpx-vp9", "libx264"]
    assert ours.encoder_sessions == {"libvpx-vp9": 1, "libx264": 2}  # the storage encode still shared
    assert meta.spec_hash == spec_hash(hflip, FAST)
    cli = ffmpeg_cli.run_condition(clip, hflip, FAST)
    assert psnr(decode_gray(cli), mirrored) > 40


def test_a_registered_kind_has_its_cli_equivalent_and_its_floor_cost(hflip, clip, tmp_path):
    src = tmp_path / "src.mp4"
    src.write_bytes(clip)
    encode, tail = ffmpeg_cli.commands(src, hflip, FAST, tmp_path)
    assert "hflip" in " ".join(tail) and "hflip" not in " ".join(encode)
    assert "hflip" in ffmpeg_cli.cli_kinds()
    names = [s.name for s in floor_steps(src, [hflip], FAST, tmp_path)]
    assert names == ["decode source", "vp9 encode", "vp9 decode", "hflip (vp9+hflip)", "h264 tail (vp9+hflip+h264)"]
    floor = measure_floor(src, [hflip], FAST, tmp_path)
    assert floor["steps"]["hflip (vp9+hflip)"] > 0
    assert floor["cpu_s"] == pytest.approx(sum(floor["steps"].values()), abs=0.01)


def test_a_registered_kind_is_a_step_of_a_conditions_file_with_the_usual_errors(hflip, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("conditions:\n  - name: mirrored\n    steps: [{kind: hflip}, {kind: h264}]\n")
    assert [s.kind for s in load_conditions_file(path).conditions[0].steps] == ["hflip", "h264"]
    path.write_text("conditions:\n  - name: mirrored\n    steps: [{kind: hflip, axis: x}, {kind: h264}]\n")
    with pytest.raises(SpecError, match=r"c.yaml:3: conditions.0.steps.0.hflip.axis: .*\(allowed: kind\)"):
        load_conditions_file(path)
    path.write_text("conditions: [{name: x, steps: [{kind: warp}]}]\n")
    with pytest.raises(SpecError, match=f"expected tags: {BUILT_IN_TAGS}, 'hflip'$"):
        load_conditions_file(path)


def test_registration_is_undone_and_a_name_is_registered_once():
    with pytest.raises(RuntimeError), STEPS.registered(HFLIP):
        assert Condition.model_validate(MIRRORED).steps[1] == HflipStep()
        with pytest.raises(SpecError, match="already registered"):
            STEPS.register(HFLIP)
        raise RuntimeError("the block fails; the kind still goes")
    assert STEPS.find("hflip") is None and "hflip" not in ffmpeg_cli.cli_kinds()
    with pytest.raises(ValidationError, match=f"expected tags: {BUILT_IN_TAGS} "):
        Condition.model_validate(MIRRORED)
    with pytest.raises(SpecError, match="already registered"):
        STEPS.register(STEPS.get("vp9"))
    with pytest.raises(SpecError, match="Literal"):  # a kind without a tag could never be told apart
        STEPS.register(StepKind(model=UntaggedStep, node=_hflip_node))
    assert [k.name for k in STEPS.kinds()] == ["vp9", "scale", "fps", "badge", "h264", "trim", "speed", "reorder"]
