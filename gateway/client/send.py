"""``lastmile send``: videos onto the input topic, by ``file://`` reference under the gateway's roots or inline.

Arguments are video files, folders (their regular video files, sorted) and JSONL manifests (their rows, with
labels; a row's ``http(s)://`` URI is sent as it is, for the gateway to fetch). Every video is checked before
anything is sent: a path outside the roots the gateway reads is refused, with the suggestion to send it inline,
and a URL whose host is not in its allow-list is refused too.
"""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from detectors.manifest import ManifestRow, read_manifest, unread_keys_notice
from gateway import bus
from gateway.core.messages import VideoEvent, VideoMessage
from gateway.core.sources import SourceError, admit_remote, is_object_uri, is_remote, local_path

if TYPE_CHECKING:
    from gateway.core.config import GatewayConfig

VIDEO_SUFFIXES = frozenset({".mp4", ".mov", ".m4v", ".webm", ".mkv", ".avi", ".gif", ".webp", ".apng"})


class SendError(ValueError):
    """A video that cannot be sent as asked (outside the roots, too large inline, not found)."""


@dataclass(frozen=True)
class Item:
    """One video to send: a local file (``path``), or a URL or object the gateway fetches (``url``: from a manifest,
    or an ``s3://``/``az://`` argument)."""

    path: Path | None
    video_id: str
    label: str | None = None
    source: str | None = None
    anchor_id: str | None = None
    url: str | None = None
    # a manifest row's, or a file's as read here: the gateway checks the bytes it reads
    sha256: str | None = None
    # where it was named, for errors: "manifest.jsonl, video v1"; empty for a file argument
    origin: str = ""

    @property
    def from_manifest(self) -> bool:
        """Its sha256 (if any) is its manifest's, so its file may have changed since (a file argument's was read
        here)."""
        return bool(self.origin)

    @property
    def uri(self) -> str:
        """What the event names: the URL, or the file's resolved ``file://`` URI."""
        return self.url or self.path.resolve().as_uri()

    @property
    def name(self) -> str:
        where = f" ({self.origin})" if self.origin else ""
        return f"{self.url or self.path}{where}"


def expand(args: Iterable[Path | str], label: str | None = None, notes: list[str] | None = None) -> list[Item]:
    """The videos named by files, folders, manifests and objects; ids from the manifest, else name + content hash
    (an object's: its name + the hash of its URI, as its bytes are read by the gateway only).
    ``notes`` gets what the caller should tell its user (a manifest's keys that lastmile does not read)."""
    items: list[Item] = []
    for given in args:
        if isinstance(given, str) and is_object_uri(given):
            items.append(_object_item(given, label))
            continue
        arg = Path(given)
        if arg.is_dir():
            items += [_item(p, label) for p in _videos(arg)]
        elif not arg.is_file():
            # a FIFO, a device or a socket would block the read, or never end it
            raise SendError(f"{arg}: not a regular file" if arg.exists() else f"{arg}: no such file or folder")
        elif arg.suffix == ".jsonl":
            rows = read_manifest(arg)
            if notes is not None and (note := unread_keys_notice(arg, rows)):
                notes.append(note)
            items += [manifest_item(arg, r) for r in rows]
        else:
            items.append(_item(arg, label))
    return items


def _object_item(uri: str, label: str | None) -> Item:
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    return Item(None, f"{Path(name).stem}-{hashlib.sha256(uri.encode()).hexdigest()[:12]}", label=label, url=uri)


def _videos(folder: Path) -> list[Path]:
    """A folder's regular video files, sorted (not a FIFO or a socket named .mp4: reading one would block)."""
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in VIDEO_SUFFIXES and p.is_file())


def manifest_item(manifest: Path, r: ManifestRow) -> Item:
    """A manifest row: a URL stays a URL; a path or ``file://`` URI is resolved against the manifest's folder, by
    the rule the gateway's fetch reads it by (:func:`gateway.core.sources.local_path`)."""
    fields = {"video_id": r.video_id, "label": r.label, "source": r.source, "anchor_id": r.anchor_id}
    fields["sha256"] = r.sha256
    origin = f"{manifest}, video {r.video_id}"
    if is_remote(r.uri):
        return Item(None, **fields, url=r.uri, origin=origin)
    try:
        return Item(local_path(r.uri, manifest.resolve().parent), **fields, origin=origin)
    except SourceError as exc:
        raise SendError(f"{exc} ({origin}); send a path, file://, http(s)://, s3:// or az://") from exc


def _item(path: Path, label: str | None) -> Item:
    digest = file_sha256(path)
    # its id names these bytes: checked
    return Item(path, f"{path.stem}-{digest[:10]}", label, sha256=digest)


def file_sha256(path: Path) -> str:
    with path.open("rb") as f:
        # in chunks: a large file is never all in memory
        return hashlib.file_digest(f, "sha256").hexdigest()


class FileDigests:
    """The sha256 of local files, each hashed again only when its size or mtime changed since it last was: one
    instance shared by the checks before sending and a running feed reads each unchanged file once."""

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[tuple[int, int], str]] = {}

    def __call__(self, path: Path) -> str:
        path = path.resolve()
        # before hashing: a file that changes while hashed is hashed again next time
        info = path.stat()
        stamp = (info.st_size, info.st_mtime_ns)
        seen = self._seen.get(path)
        if seen is None or seen[0] != stamp:
            seen = self._seen[path] = (stamp, file_sha256(path))
        return seen[1]


def _regular_file(item: Item) -> tuple[Path, int]:
    """The item's resolved path and size, if it is a regular file (a FIFO would block an inline read)."""
    try:
        path = item.path.resolve()
        info = path.stat()
    except (OSError, ValueError) as exc:
        # missing, unreadable, a NUL in the name
        raise SendError(f"{item.name}: {getattr(exc, 'strerror', None) or exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise SendError(f"{item.name}: not a regular file")
    return path, info.st_size


@dataclass(frozen=True)
class Advice:
    """What a refusal tells its command's user to do instead (`lastmile send`'s options by default)."""

    outside_roots: str = "send it with --inline, or start `lastmile up` in a folder above it"
    url_inline: str = "leave out --inline"


def check_manifest_digest(name: str, digest: str, expected: str) -> None:
    """Refuse the manifest row ``name`` whose file (of sha256 ``digest``) is not the one its manifest hashed
    (``expected``): one refusal before it is sent, not a dead letter from the gateway."""
    if digest != expected:
        why = f"its bytes have sha256 {digest}, not the {expected} its manifest gives"
        since = "the file changed after the manifest was written; the gateway would not score it"
        raise SendError(f"{name}: {why} ({since})")


def video_message(item: Item, data: bytes | None = None, digests: bool = True, canary: bool = False) -> VideoMessage:
    """``item``'s input-topic message: inline with ``data`` (its file's bytes), else by reference. ``digests``
    False leaves its sha256 out (a gateway from before 2026-12-04 refuses the key); ``canary``: fed by
    ``lastmile canary run``."""
    fields = {"video_id": item.video_id, "label": item.label, "source": item.source, "anchor_id": item.anchor_id}
    fields["uri"] = item.uri if data is None else None
    return VideoMessage.of(VideoEvent(**fields, sha256=item.sha256 if digests else None, canary=canary), data)


def check_digest(item: Item, hashes: FileDigests) -> None:
    """Refuse a manifest row's local file that is not the one its manifest hashed (:func:`check_manifest_digest`;
    ``hashes`` hashes it again only once its size or mtime changed)."""
    if item.path is not None and item.from_manifest and item.sha256 is not None:
        check_manifest_digest(item.name, hashes(item.path), item.sha256)


class Sender:
    """Videos onto the input topic. ``digests=False`` leaves their sha256 out of the events, for a gateway from
    before 2026-12-04 (it refuses the key); the gateway then does not check the bytes it reads."""

    def __init__(
        self,
        cfg: GatewayConfig,
        inline: bool = False,
        advice: Advice = Advice(),
        digests: bool = True,
        hashes: FileDigests | None = None,
    ) -> None:
        self.cfg, self.inline, self.advice, self.digests = cfg, inline, advice, digests
        # a canary feed's own: its first messages do not hash them again
        self.hashes = hashes or FileDigests()
        self.roots = [Path(r).resolve() for r in cfg.sources.file_roots]

    def check(self, items: list[Item]) -> None:
        """Refuse the whole batch before sending any of it, if one video cannot be sent as asked (a manifest row
        whose file lost its sha256 too, whether or not the events carry it: each file hashed once)."""
        for item in items:
            if item.url is not None:
                self._check_url(item)
                continue
            path, size = _regular_file(item)
            if self.inline:
                if size > min(self.cfg.kafka.max_message_bytes, self.cfg.limits.max_bytes):
                    raise SendError(f"{item.name} is {size} bytes: too large to send inline")
            elif not any(path.is_relative_to(root) for root in self.roots):
                roots = ", ".join(map(str, self.roots)) or "none configured"
                where = f"lies outside the folders the gateway reads ({roots})"
                raise SendError(f"{item.name} {where}; {self.advice.outside_roots}")
            # a file argument's was hashed just now; a file over the gateway's limit is refused there, unread
            if size <= self.cfg.limits.max_bytes:
                check_digest(item, self.hashes)

    def _check_url(self, item: Item) -> None:
        if self.inline:
            why = "a URL cannot be sent inline (the gateway fetches it)"
            raise SendError(f"{item.name}: {why}; {self.advice.url_inline}")
        hosts, prefixes = self.cfg.sources.http_allow_hosts, self.cfg.sources.object_stores
        try:
            admit_remote(item.url, hosts, prefixes)
        except SourceError as exc:
            setting, listed = ("object_stores", prefixes) if is_object_uri(item.url) else ("http_allow_hosts", hosts)
            raise SendError(f"{item.name}: {exc} (the gateway's sources.{setting}: {listed or 'none'})") from exc

    def message(self, item: Item) -> tuple[bytes, list[tuple[str, bytes]] | None]:
        """The value and headers of ``item``'s message (:func:`video_message`)."""
        message = video_message(item, item.path.read_bytes() if self.inline else None, self.digests)
        return message.value, message.headers

    def send(self, items: list[Item], progress: bool = True) -> int:
        """Send every item, each acknowledged by the broker; returns how many."""
        from tqdm import tqdm

        self.check(items)
        # a broker that does not answer: one line within seconds, nothing half-sent
        bus.ping(self.cfg.kafka)
        producer = bus.producer(self.cfg.kafka)
        topic = self.cfg.kafka.input_topic
        try:
            for item in tqdm(items, desc="sending", unit="video", disable=not progress):
                value, headers = self.message(item)
                producer.send_and_wait(topic, value, key=item.video_id.encode(), headers=headers or ())
        finally:
            producer.close()
        return len(items)
