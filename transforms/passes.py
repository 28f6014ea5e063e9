"""The prefix tree run in passes whose encoders fit a memory budget (the estimate: :mod:`transforms.memory`).

:func:`schedule` splits the children of each *replayable* node (the root, which can decode the input again, and
each VP9 storage encode, which keeps its packets) into passes; :class:`PassRunner` runs them: it arms a pass
(encoders on their own threads, :mod:`transforms.branches`), feeds it, restores every node's full list of
children, then runs the later passes of each storage encode that ran, fed by replaying its packets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from transforms.branches import Branch, Worker
from transforms.encoders import H264Sink, Vp9Node
from transforms.memory import encoder_memory, split
from transforms.nodes import Node, NormalizeNode
from transforms.spec import Profile


def schedule(node: Node, profile: Profile, budget: int) -> int:
    """Set ``passes`` on ``node`` and below; return the estimated peak bytes of ``node``'s subtree."""
    costs = [schedule(child, profile, budget) for child in node.children]
    own = encoder_bytes(node, profile)
    node.passes = [list(range(len(costs)))]
    if isinstance(node, NormalizeNode | Vp9Node) and len(costs) > 1 and own + sum(costs) > budget:
        node.passes = split(own, costs, budget)
        if isinstance(node, Vp9Node) and len(node.passes) > 1:
            node.keep_packets()
    return max((own if k == 0 else 0) + sum(costs[i] for i in p) for k, p in enumerate(node.passes))


def encoder_bytes(node: Node, profile: Profile) -> int:
    """The estimated resident bytes of the encoder that ``node`` opens (0 for a node that opens none)."""
    if isinstance(node, Vp9Node):
        return encoder_memory().encoder_bytes("vp9", profile, node.pixels)
    if isinstance(node, H264Sink):
        return encoder_memory().encoder_bytes(node.encoder_name, profile, node.pixels)
    return 0


def count_passes(root: Node) -> int:
    """Decodes that feed the tree: the root's passes plus each storage encode's replays."""
    return max(1, len(root.passes) + sum(len(n.passes) - 1 for n in walk([root]) if isinstance(n, Vp9Node)))


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
            for later in node.passes[1:] if isinstance(node, Vp9Node) else []:
                self._run_pass(Node(), [children[i] for i in later], lambda h, n=node: _replay(n, h))
        return seconds

    def _arm(self, node: Node, threads: list[Worker], armed: list[tuple[Node, list[Node]]]) -> None:
        """Give ``node`` (recursively) the children of its first pass, encoders wrapped in threads."""
        first = [node.children[i] for i in node.passes[0]] if node.passes else node.children
        armed.append((node, node.children))
        node.children = [self._branch(child, threads) for child in first]
        if self.concurrent and isinstance(node, Vp9Node) and first:
            threads.append(node.decode_apart())  # its decode and filters beside its encoder
        for child in first:
            self._arm(child, threads, armed)

    def _branch(self, node: Node, threads: list[Worker]) -> Node:
        if not self.concurrent or node.kind not in ("vp9", "h264"):
            return node
        branch = Branch(node)
        threads.append(branch.worker)
        return branch


def _replay(vp9: Vp9Node, head: Node) -> float:
    for frame in vp9.replay():
        head.feed(frame)
    head.finish()
    return 0.0
