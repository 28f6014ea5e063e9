"""The prefix tree run in passes whose encoders fit a memory budget (the estimate: :mod:`transforms.memory`).

:func:`schedule` splits the children of each *replayable* node (the root, which can decode the input again, and
each node whose step kind's scheduling says so: the VP9 storage encode, which keeps its packets) into passes;
:class:`PassRunner` runs them: it arms a pass (the nodes that open an encoder on their own threads,
:mod:`transforms.branches`), feeds it, restores every node's full list of children, then runs the later passes of
each storage encode that ran, fed by replaying its packets. What a node opens and whether it replays, its step's
kind says (:class:`transforms.steps.kind.Scheduling`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, cast

import av

from transforms.branches import Branch, Worker
from transforms.memory import split
from transforms.nodes import Node, NormalizeNode
from transforms.profile import Profile
from transforms.steps.registry import STEPS


class Replayable(Protocol):
    """What the node of a kind whose scheduling is ``replayable`` does (the VP9 storage encode)."""

    passes: list[list[int]]
    children: list[Node]

    def keep_packets(self) -> None:
        """Keep what it encodes, for :meth:`replay`."""

    def replay(self) -> Iterator[av.VideoFrame]:
        """Its output frames once more, for a later pass."""

    def decode_apart(self) -> Worker:
        """Run its decode (and its children) on a thread of its own from now on."""


def replayable(node: Node) -> bool:
    """Whether ``node``'s step kind feeds its children again in later passes (the root, which decodes the input
    again, is not a step)."""
    kind = STEPS.find(node.kind)
    return kind is not None and kind.scheduling.replayable


def schedule(node: Node, profile: Profile, budget: int) -> int:
    """Set ``passes`` on ``node`` and below; return the estimated peak bytes of ``node``'s subtree."""
    costs = [schedule(child, profile, budget) for child in node.children]
    own = encoder_bytes(node, profile)
    node.passes = [list(range(len(costs)))]
    if (isinstance(node, NormalizeNode) or replayable(node)) and len(costs) > 1 and own + sum(costs) > budget:
        node.passes = split(own, costs, budget)
        if replayable(node) and len(node.passes) > 1:
            cast(Replayable, node).keep_packets()
    return max((own if k == 0 else 0) + sum(costs[i] for i in p) for k, p in enumerate(node.passes))


def encoder_bytes(node: Node, profile: Profile) -> int:
    """The estimated resident bytes of the encoder that ``node`` opens (0 for a node that opens none), as its
    step's kind estimates them."""
    kind = STEPS.find(node.kind)
    estimate = kind.scheduling.encoder_bytes if kind is not None else None
    return estimate(node, profile) if estimate is not None else 0


def opens_encoder(node: Node) -> bool:
    """Whether ``node`` opens an encoder (it then runs on a thread of its own)."""
    kind = STEPS.find(node.kind)
    return kind is not None and kind.scheduling.encoder_bytes is not None


def count_passes(root: Node) -> int:
    """Decodes that feed the tree: the root's passes plus each storage encode's replays."""
    return max(1, len(root.passes) + sum(len(n.passes) - 1 for n in walk([root]) if replayable(n)))


def walk(nodes: list[Node]) -> Iterator[Node]:
    for node in nodes:
        yield node
        yield from walk(node.children)


class PassRunner:
    """Runs a scheduled tree; with ``concurrent``, each encoder (and everything below it) on its own thread."""

    def __init__(self, concurrent: bool = True) -> None:
        self.concurrent = concurrent

    def run(self, root: Node, stream: Callable[[Node], float]) -> float:
        """Each pass of the root: ``stream(head)`` decodes the input into ``head`` (the root, then a fresh
        normaliser, since a filter graph serves one pass). Returns the seconds ``stream`` reported."""
        seconds = 0.0
        for k, group in enumerate(root.passes):
            head = root if k == 0 else NormalizeNode()
            seconds += self._run_pass(head, [root.children[i] for i in group], stream)
        return seconds

    def _run_pass(self, head: Node, group: list[Node], feed: Callable[[Node], float]) -> float:
        threads: list[Worker] = []
        armed: list[tuple[Node, list[Node]]] = []
        full = head.children
        head.children = [self._branch(node, threads) for node in group]
        for node in group:
            self._arm(node, threads, armed)
        try:
            seconds = feed(head)
        finally:
            for thread in threads:  # after a failure, no thread is left waiting for frames
                thread.close()
            head.children = full
            for node, children in armed:
                node.children = children
        for node, children in armed:
            for later in node.passes[1:] if replayable(node) else []:
                self._run_pass(Node(), [children[i] for i in later], lambda h, n=node: _replay(n, h))
        return seconds

    def _arm(self, node: Node, threads: list[Worker], armed: list[tuple[Node, list[Node]]]) -> None:
        """Give ``node`` (recursively) the children of its first pass, encoders wrapped in threads."""
        first = [node.children[i] for i in node.passes[0]] if node.passes else node.children
        armed.append((node, node.children))
        node.children = [self._branch(child, threads) for child in first]
        if self.concurrent and replayable(node) and first:
            threads.append(cast(Replayable, node).decode_apart())  # its decode and filters beside its encoder
        for child in first:
            self._arm(child, threads, armed)

    def _branch(self, node: Node, threads: list[Worker]) -> Node:
        if not self.concurrent or not opens_encoder(node):
            return node
        branch = Branch(node)
        threads.append(branch.worker)
        return branch


def _replay(node: Node, head: Node) -> float:
    for frame in cast(Replayable, node).replay():
        head.feed(frame)
    head.finish()
    return 0.0
