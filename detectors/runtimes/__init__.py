"""Runtimes that score sampled frames, one interface (:class:`~detectors.runtimes.base.Runtime`): embedded
onnxruntime in the calling process, a Triton server over gRPC, (for a card with ``remote:``) any Open
Inference Protocol server, or (for a card with ``chat:``) a multimodal LLM behind the Chat Completions API, whose
runtime also judges (:class:`~detectors.runtimes.chat.ChatRuntime`). :func:`make_runtime` picks one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from detectors.repository import Installed
    from detectors.runtimes.base import Runtime
    from detectors.runtimes.providers import ProviderSettings

RuntimeName = Literal["embedded", "triton", "remote", "chat"]


def make_runtime(
    inst: Installed,
    runtime: RuntimeName,
    triton_url: str = "127.0.0.1:8001",
    startup_timeout_s: float = 30.0,
    providers: ProviderSettings | None = None,
    chat_cache: bool = True,
) -> Runtime:
    """The runtime ``runtime`` for one installed detector (the embedded one runs single-threaded, on the execution
    provider ``providers`` names: the CPU by default); a remote detector (its card names a server) always uses
    the remote runtime, a chat detector the chat runtime (its replies cached unless ``chat_cache`` is false)."""
    if inst.card.chat is not None:
        from detectors.chat.cache import ReplyCache
        from detectors.runtimes.chat import ChatRuntime

        cache = ReplyCache() if chat_cache else None
        return ChatRuntime(inst.card, inst.folder, cache=cache, startup_timeout_s=startup_timeout_s)
    if inst.card.remote is not None:
        from detectors.runtimes.remote import RemoteRuntime

        return RemoteRuntime(inst.card, startup_timeout_s=startup_timeout_s)
    if runtime == "embedded":
        from detectors.runtimes.embedded import EmbeddedRuntime

        return EmbeddedRuntime(inst.model_path, inst.card, intra_op_threads=1, settings=providers)
    check_servable(inst, runtime)
    from detectors.runtimes.triton import TritonRuntime

    return TritonRuntime(inst.card, url=triton_url, startup_timeout_s=startup_timeout_s)


def check_servable(inst: Installed, runtime: RuntimeName) -> None:
    """:class:`~detectors.errors.CardError` for a version beside a detector's default one asked of Triton, which
    serves the default version only (the repository's numbered folders)."""
    if runtime == "triton" and not inst.default and not inst.card.served_elsewhere:
        from detectors.errors import CardError

        raise CardError(
            f"{inst.key}: Triton serves each detector's default version only; score this one with `runtime: embedded`"
        )
