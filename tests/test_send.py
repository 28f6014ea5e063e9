"""`lastmile send`'s client side: what each argument becomes, and what is refused before anything is sent. (The
round trip through a broker and a gateway: tests/test_up.py.)"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from gateway.client.send import Sender, SendError, expand
from gateway.core.config import GatewayConfig
from gateway.core.messages import VideoEvent
from gateway.core.sources import SourceError, fetch


def _manifest(folder: Path, *uris: str) -> Path:
    rows = [{"video_id": "r", "uri": uris[0], "label": "real", "source": "real", "anchor_id": "r"}]
    rows += [{"video_id": f"g{i}", "uri": u, "label": "generated", "source": "gen", "anchor_id": "r"}
             for i, u in enumerate(uris[1:])]  # fmt: skip
    path = folder / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _event(sender: Sender, item) -> VideoEvent:
    value, headers = sender.message(item)
    assert headers is None
    return VideoEvent.model_validate_json(value)


def test_a_manifest_url_is_sent_as_it_is_for_the_gateway_to_fetch(tmp_path):
    """It was made a path under the manifest's folder (`file:///.../m/http%3A/...`), so no manifest could name a
    URL, and the dead letter blamed a missing file instead of the allow-list."""
    (tmp_path / "a b.mp4").write_bytes(b"x")
    url = "https://cdn.example.com/v.mp4?sig=1"
    items = expand([_manifest(tmp_path, "file://" + str(tmp_path / "a%20b.mp4"), url, "a b.mp4")])
    cfg = GatewayConfig(sources={"file_roots": [str(tmp_path)], "http_allow_hosts": ["CDN.example.com"]})
    sender = Sender(cfg)
    sender.check(items)
    events = [_event(sender, i) for i in items]
    assert [e.uri for e in events] == [(tmp_path / "a b.mp4").as_uri(), url, (tmp_path / "a b.mp4").as_uri()]
    assert [e.video_id for e in events] == ["r", "g0", "g1"] and events[1].label == "generated"


@pytest.mark.parametrize(
    ("uri", "inline", "message"),
    [
        ("http://example.com/v.mp4", False, r"host 'example.com' is not in the allow-list \(the gateway's sources"),
        ("http://169.254.169.254/latest", False, r"host '169.254.169.254' is not in the allow-list"),
        ("http://user@cdn.example.com/v.mp4", False, r"has a user part"),
        ("ftp://cdn.example.com/v.mp4", False, r"unsupported URI scheme 'ftp'"),
        ("https://cdn.example.com/v.mp4", True, r"a URL cannot be sent inline"),
        ("file://videos/r.mp4", False, r"names host 'videos' \(a local file: file:///PATH\)"),  # (not /r.mp4 here)
        ("gone.mp4", False, r"gone.mp4 \(.*\): No such file or directory"),
        ("gone.mp4", True, r"gone.mp4 \(.*\): No such file or directory"),
        ("file:///a%00b.mp4", False, r"control character in the path of"),
    ],
)
def test_a_url_the_gateway_would_refuse_is_refused_before_anything_is_sent(tmp_path, uri, inline, message):
    (tmp_path / "r.mp4").write_bytes(b"x")
    cfg = GatewayConfig(sources={"file_roots": [str(tmp_path)], "http_allow_hosts": ["cdn.example.com"]})
    with pytest.raises(SendError, match=message) as caught:
        Sender(cfg, inline=inline).check(expand([_manifest(tmp_path, "r.mp4", uri)]))
    assert "m.jsonl, video g0" in str(caught.value)  # which row of which manifest


def test_objects_are_sent_by_uri_from_arguments_and_manifests_and_refused_outside_the_stores(tmp_path):
    (tmp_path / "r.mp4").write_bytes(b"x")
    cfg = GatewayConfig(
        sources={"file_roots": [str(tmp_path)], "object_stores": ["s3://uploads/videos/", "az://media"]}
    )
    items = expand(["s3://uploads/videos/a.mp4", _manifest(tmp_path, "r.mp4", "az://media/clips/b.mp4")])
    sender = Sender(cfg)
    sender.check(items)
    events = [_event(sender, i) for i in items]
    assert [e.uri for e in events] == [
        "s3://uploads/videos/a.mp4",
        (tmp_path / "r.mp4").as_uri(),
        "az://media/clips/b.mp4",
    ]
    assert events[0].video_id.startswith("a-") and events[2].video_id == "g0"  # (an argument: its name + URI hash)
    with pytest.raises(SendError, match=r"key 'private/a.mp4': outside sources.object_stores .*sources.object_stores"):
        sender.check(expand(["s3://uploads/private/a.mp4"]))
    with pytest.raises(SendError, match=r"a URL cannot be sent inline"):
        Sender(cfg, inline=True).check(expand(["s3://uploads/videos/a.mp4"]))


def test_a_manifest_row_outside_the_roots_names_its_manifest_and_video(tmp_path):
    (tmp_path / "r.mp4").write_bytes(b"x")
    cfg = GatewayConfig(sources={"file_roots": [str(tmp_path)]})
    with pytest.raises(SendError, match=r"/etc/hostname \(.*m\.jsonl, video g0\) lies outside the folders"):
        Sender(cfg).check(expand([_manifest(tmp_path, "r.mp4", "/etc/hostname")]))


def _expand_within(args: list[Path], timeout_s: float = 60.0):
    """expand(), failing (not hanging) if it blocks: reading a FIFO waits for a writer that never comes."""
    out: dict = {}

    def run() -> None:
        try:
            out["items"] = expand(args, "real")
        except SendError as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), f"expand({args}) blocked for {timeout_s} s"
    return out


def test_a_fifo_named_like_a_video_is_left_out_of_a_folder_and_refused_by_name(tmp_path):
    """`lastmile send FOLDER` hung for ever on a FIFO named .mp4 (it read every file to hash it), and a FIFO given
    by name was "no such file or folder"."""
    (tmp_path / "clip.mp4").write_bytes(b"x" * 10)
    os.mkfifo(tmp_path / "pipe.mp4")
    got = _expand_within([tmp_path])
    assert [i.path.name for i in got["items"]] == ["clip.mp4"]
    got = _expand_within([tmp_path / "pipe.mp4"])
    assert str(got["error"]) == f"{tmp_path / 'pipe.mp4'}: not a regular file"
    os.mkfifo(tmp_path / "rows.jsonl")
    assert str(_expand_within([tmp_path / "rows.jsonl"])["error"]).endswith("rows.jsonl: not a regular file")
    assert str(_expand_within([tmp_path / "gone.mp4"])["error"]).endswith("gone.mp4: no such file or folder")


def test_a_fifo_named_by_a_manifest_is_refused_before_an_inline_read_could_block(tmp_path):
    (tmp_path / "r.mp4").write_bytes(b"x")
    os.mkfifo(tmp_path / "pipe.mp4")
    cfg = GatewayConfig(sources={"file_roots": [str(tmp_path)]})
    for inline in (True, False):
        with pytest.raises(SendError, match=r"pipe\.mp4 \(.*video g0\): not a regular file"):
            Sender(cfg, inline=inline).check(expand([_manifest(tmp_path, "r.mp4", "pipe.mp4")]))


@pytest.mark.parametrize(
    "uri",
    [
        "r.mp4", "./c:/r.mp4", "sub/../r.mp4", "file:///{d}/r.mp4", "file://localhost/{d}/r.mp4", "file:///{d}/%72.mp4",
        "c:/r.mp4", "clip:r.mp4", "file://videos/{d}/r.mp4", "ftp://cdn.example.com/r.mp4", "file:///{d}/r%00.mp4",
        "r\x01.mp4", "mailto:r.mp4",
    ],
)  # fmt: skip
def test_a_manifest_row_names_the_file_the_gateway_would_read_or_is_refused_as_the_gateway_would(tmp_path, uri):
    """`lastmile send` and the gateway's fetch had a rule each for what a row's URI names: `c:/r.mp4` was a path
    to send but an unsupported scheme 'c' to fetch. Now one rule (sources.local_path) serves both."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "c:").mkdir()
    (tmp_path / "r.mp4").write_bytes(b"top")
    (tmp_path / "c:" / "r.mp4").write_bytes(b"drive-like")
    uri = uri.format(d=str(tmp_path).lstrip("/"))
    try:
        fetched, refused = fetch(uri, base=tmp_path, roots=[tmp_path]), None
    except SourceError as exc:
        fetched, refused = None, str(exc)
    try:
        (item,) = expand([_manifest(tmp_path, uri)])
        sent, send_refused = fetch(item.uri, roots=[tmp_path]), None  # the URI on the wire, as the gateway reads it
    except SendError as exc:
        sent, send_refused = None, str(exc)
    assert (sent, send_refused is None) == (fetched, refused is None)
    if refused:
        assert send_refused.startswith(f"{refused} ({tmp_path / 'm.jsonl'}, video r)")


def test_a_path_that_looks_like_a_scheme_is_refused_with_the_way_to_write_it(tmp_path):
    (tmp_path / "c:").mkdir()
    (tmp_path / "c:" / "r.mp4").write_bytes(b"x")
    with pytest.raises(SendError, match=r"unsupported URI scheme 'c' in 'c:/r.mp4' \(a path whose .*write \./PATH\)"):
        expand([_manifest(tmp_path, "c:/r.mp4")])
    with pytest.raises(SourceError, match=r"unsupported URI scheme 'ftp' in 'ftp://h/r.mp4'$"):  # (no hint: a URL)
        fetch("ftp://h/r.mp4")
    assert fetch("./c:/r.mp4", base=tmp_path, roots=[tmp_path]) == b"x"


@pytest.mark.parametrize("folder", ["\udcff", "caf\u00e9", "a b%41", "%2e%2e", "\u00ff\udce9"])
def test_a_folder_whose_name_is_not_utf8_is_carried_through_the_file_uri_send_puts_on_the_wire(tmp_path, folder):
    """`Path.as_uri()` percent-encodes a path's bytes (`%FF` for a byte that is not UTF-8), but the fetch decoded
    the URI as UTF-8 and looked for `\ufffd`: a file sent by reference from such a folder was never found."""
    where = tmp_path / folder
    where.mkdir()
    (where / "r.mp4").write_bytes(folder.encode("utf-8", "surrogateescape"))
    (item,) = expand([_manifest(where, "r.mp4")])
    assert item.uri.startswith("file:///") and item.uri.isascii()
    assert fetch(item.uri, roots=[tmp_path]) == folder.encode("utf-8", "surrogateescape")
