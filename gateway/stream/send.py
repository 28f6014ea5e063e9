"""``lastmile send``: videos onto the input topic, by ``file://`` reference under the gateway's roots or inline.

Arguments are video files, folders (their video files, sorted) and JSONL manifests (their rows, with labels).
Every path is checked before anything is sent: one outside the roots the gateway reads is refused, with the
suggestion to send it inline.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from detectors.manifest import read_manifest
from gateway import bus
from gateway.core.messages import VideoEvent, inline_headers

if TYPE_CHECKING:
    from gateway.core.config import GatewayConfig

VIDEO_SUFFIXES = frozenset({".mp4", ".mov", ".m4v", ".webm", ".mkv", ".avi", ".gif", ".webp", ".apng"})


class SendError(ValueError):
    """A video that cannot be sent as asked (outside the roots, too large inline, not found)."""


@dataclass(frozen=True)
class Item:
    path: Path
    video_id: str
    label: str | None = None
    source: str | None = None
    anchor_id: str | None = None


def expand(args: Iterable[Path], label: str | None = None) -> list[Item]:
    """The videos named by files, folders and manifests; ids from the manifest, else name + content hash."""
    items: list[Item] = []
    for arg in args:
        if arg.is_dir():
            items += [_item(p, label) for p in sorted(arg.iterdir()) if p.suffix.lower() in VIDEO_SUFFIXES]
        elif arg.suffix == ".jsonl":
            base = arg.resolve().parent
            for r in read_manifest(arg):
                path = Path(r.uri.removeprefix("file://"))
                items.append(Item(path if path.is_absolute() else base / path, r.video_id, r.label, r.source,
                                  r.anchor_id))  # fmt: skip
        elif arg.is_file():
            items.append(_item(arg, label))
        else:
            raise SendError(f"{arg}: no such file or folder")
    return items


def _item(path: Path, label: str | None) -> Item:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:10]
    return Item(path, f"{path.stem}-{digest}", label)


class Sender:
    def __init__(self, cfg: GatewayConfig, inline: bool = False) -> None:
        self.cfg, self.inline = cfg, inline
        self.roots = [Path(r).resolve() for r in cfg.sources.file_roots]

    def check(self, items: list[Item]) -> None:
        """Refuse the whole batch before sending any of it, if one video cannot be sent as asked."""
        for item in items:
            path = item.path.resolve()
            if self.inline:
                size = path.stat().st_size
                if size > min(self.cfg.kafka.max_message_bytes, self.cfg.limits.max_bytes):
                    raise SendError(f"{item.path} is {size} bytes: too large to send inline")
            elif not any(path.is_relative_to(root) for root in self.roots):
                roots = ", ".join(map(str, self.roots)) or "none configured"
                raise SendError(
                    f"{item.path} lies outside the folders the gateway reads ({roots}); "
                    "send it with --inline, or start `lastmile up` in a folder above it"
                )

    def message(self, item: Item) -> tuple[bytes, list[tuple[str, bytes]] | None]:
        fields = {"video_id": item.video_id, "label": item.label, "source": item.source, "anchor_id": item.anchor_id}
        if self.inline:
            return item.path.read_bytes(), inline_headers(VideoEvent(**fields))
        return VideoEvent(**fields, uri=item.path.resolve().as_uri()).model_dump_json().encode(), None

    def send(self, items: list[Item], progress: bool = True) -> int:
        """Send every item, each acknowledged by the broker; returns how many."""
        from tqdm import tqdm

        self.check(items)
        producer = bus.producer(self.cfg.kafka)
        topic = self.cfg.kafka.input_topic
        try:
            for item in tqdm(items, desc="sending", unit="video", disable=not progress):
                value, headers = self.message(item)
                producer.send_and_wait(topic, value, key=item.video_id.encode(), headers=headers or ())
        finally:
            producer.close()
        return len(items)
