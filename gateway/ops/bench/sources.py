"""``lastmile bench sources``: the gateway's read of an S3 object (:func:`gateway.core.sources.stores.read_object`:
HEAD, then a ranged, capped, chunked GET) against the vendor SDK's own downloads of the same object from the same
server, in one run: boto3's ``get_object(...)["Body"].read()`` and its transfer manager's ``download_fileobj``.

The server is an S3 endpoint of the user's (``--endpoint``, with ``--uri`` an object there, credentials from the
SDK's chain), or moto's S3 server started here on loopback (``moto[server]``, the ``bench`` extra) holding an
object of ``--mb`` MB of random bytes. Each read runs in a freshly spawned process
(:func:`gateway.ops.bench.measure.isolated`: wall and CPU seconds, peak resident memory), its client made and its
connection opened before the clock starts; the targets take turns, ``--repeats`` times, and each reports its
median. ``speed_vs_*`` is the SDK's median wall time over the gateway's (1.0: as fast; the target is 0.8)."""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

from gateway.ops.bench.measure import host, isolated, measure

TARGETS = ("lastmile", "sdk_get", "sdk_download")
SPEED_TARGET = 0.8


def _client(endpoint: str | None) -> Any:
    import boto3

    return boto3.session.Session().client("s3", endpoint_url=endpoint)


def read_job(target: str, endpoint: str | None, uri: str, size: int) -> dict[str, Any]:
    """One read of ``uri`` by ``target``; its bytes' count checked."""
    import io

    from gateway.core.sources.stores import StoreSettings, parse_object_uri, read_object, s3_client

    obj = parse_object_uri(uri)
    client = _client(endpoint)
    client.head_bucket(Bucket=obj.bucket)  # (credentials resolved and a connection opened before the clock)
    got: list[int] = []
    if target == "lastmile":
        settings = StoreSettings(s3_endpoint_url=endpoint, total_s=600)
        # its own client (one per process), made and its connection opened as the SDK's is
        s3_client(endpoint, settings.s3_addressing_style, settings.timeout_s).head_bucket(Bucket=obj.bucket)

        def run() -> None:
            got.append(len(read_object(uri, [f"s3://{obj.bucket}/"], settings, size)))
    elif target == "sdk_get":

        def run() -> None:
            got.append(len(client.get_object(Bucket=obj.bucket, Key=obj.key)["Body"].read()))
    else:

        def run() -> None:
            out = io.BytesIO()
            client.download_fileobj(obj.bucket, obj.key, out)
            got.append(len(out.getbuffer()))  # (parts are written where they go: not tell())

    took = measure(run)
    if got != [size]:
        raise RuntimeError(f"{target} read {got} bytes of the {size} of {uri}")
    return {**took, "mb_per_s": round(size / 2**20 / took["wall_s"], 1)}


def bench_sources(
    mb: int = 100, repeats: int = 3, endpoint: str | None = None, uri: str | None = None
) -> dict[str, Any]:
    """The three reads of one object, each ``repeats`` times in turn; their medians and the speed ratios."""
    with _server(endpoint, uri, mb) as (url, object_uri, size, store):
        runs: dict[str, list[dict[str, Any]]] = {t: [] for t in TARGETS}
        for _ in range(repeats):
            for target in TARGETS:
                runs[target].append(isolated(read_job, target, url, object_uri, size))
    medians = {t: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for t, rs in runs.items()}
    ours = medians["lastmile"]["wall_s"]
    speed = {f"speed_vs_{t}": round(medians[t]["wall_s"] / ours, 3) for t in TARGETS[1:]}
    return {
        "bench": "sources",
        "host": host(),
        "store": store,
        "object": {"uri": object_uri, "bytes": size},
        "repeats": repeats,
        "targets": medians,
        **speed,
        "speed_target": SPEED_TARGET,
        "met": all(v >= SPEED_TARGET for v in speed.values()),
    }


@contextlib.contextmanager
def _server(endpoint: str | None, uri: str | None, mb: int) -> Iterator[tuple[str | None, str, int, str]]:
    """(endpoint, object URI, its size, what the store is): the user's, or moto's on loopback with an object."""
    if uri is not None:
        from gateway.core.sources.stores import parse_object_uri

        obj = parse_object_uri(uri)
        size = int(_client(endpoint).head_object(Bucket=obj.bucket, Key=obj.key)["ContentLength"])
        yield endpoint, uri, size, f"S3 at {endpoint or 'the SDK endpoint'}"
        return
    for k, v in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(k, v)  # (moto takes any credentials; spawned jobs inherit them)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait(url, server)
        client = _client(url)
        client.create_bucket(Bucket="bench")
        size = mb * 2**20
        client.put_object(Bucket="bench", Key="object.bin", Body=os.urandom(size))
        yield url, "s3://bench/object.bin", size, "moto's S3 server on loopback (moto[server])"
    finally:
        server.terminate()
        server.wait(10)


def _wait(url: str, server: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if server.poll() is not None:
            raise RuntimeError("moto's S3 server exited at start (is moto[server] installed? the bench extra)")
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto's S3 server did not answer at {url}") from None
            time.sleep(0.1)  # the polling interval of a start-up
