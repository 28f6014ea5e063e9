"""Object stores as a source: ``s3://bucket/key`` (AWS S3, and S3-compatible stores such as MinIO, Ceph or R2
through ``AWS_ENDPOINT_URL`` or ``sources.s3_endpoint_url``), ``az://container/blob`` (Azure Blob Storage) and
``gs://bucket/object`` (Google Cloud Storage; ``STORAGE_EMULATOR_HOST`` for an emulator).

- Confined: a URI is read only under one of ``sources.object_stores``, URI prefixes compared as written
  (``s3://uploads/videos/``; a prefix naming only its bucket, ``az://media``, is that bucket's every key).
- Credentials: each SDK's standard chain (boto3's environment, files, web identity and instance roles; for Azure,
  ``AZURE_STORAGE_CONNECTION_STRING`` or azure-identity's ``DefaultAzureCredential``; for GCS, Application Default
  Credentials: ``GOOGLE_APPLICATION_CREDENTIALS``, workload identity's metadata server), never a message.
- Bounded as a download (:mod:`.downloads`): the object's size is asked first (HEAD) and an object over
  ``max_bytes`` is refused unread; the read asks for at most ``max_bytes + 1`` bytes of the version that HEAD saw
  (``Range``, ``If-Match``; S3 answers with its length, checked before the body is read, then read whole as the
  SDK reads it; Azure's SDK in chunks, the cap and deadline checked after each), each socket read within the
  timeout.
- Typed: a missing object, a missing bucket and denied access are :class:`SourceError` (the video's dead letter
  names the store and the key); throttling (503 SlowDown, 500), a timeout and an unreachable endpoint are
  :class:`SourceUnavailable`, retried with the gateway's backoff and never a verdict.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from gateway.core.sources.errors import SourceError, SourceUnavailable, show
from gateway.core.sources.files import read_bounded
from gateway.core.sources.urls import CONTROL, scheme_of
from transforms.errors import LimitExceeded

Store = Literal["s3", "az", "gs"]
STORES: tuple[Store, ...] = ("s3", "az", "gs")
NAMES = {"s3": "bucket", "az": "container", "gs": "bucket"}
# S3 bucket names (3-63: lowercase letters, digits, dots, hyphens) and Azure container names (no dots) alike; GCS
# bucket names may also hold underscores, and run to 222 characters with dots
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_GCS_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
MAX_KEY_BYTES = 1024
# S3 error codes that say the object will not be read whatever is retried: the video's own dead letter
MISSING = frozenset({"NoSuchKey", "NoSuchBucket", "NotFound", "404", "BlobNotFound", "ContainerNotFound"})
DENIED = frozenset({
    "AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "InvalidToken",
    "ExpiredToken", "AuthenticationFailed", "AuthorizationFailure", "AuthorizationPermissionMismatch",
})  # fmt: skip
CHANGED = frozenset({"PreconditionFailed", "412", "ConditionNotMet"})


SDKS = {"s3": "boto3", "az": "azure.storage.blob", "gs": "google.cloud.storage"}  # what each store is read with
EXTRA = "pip install 'lastmile-gateway[attach]'"


def installed(module: str) -> bool:
    """Whether ``module`` (a package of the ``attach`` extra) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # (a parent package missing: google, azure)
        return False


def require_sdk(store: str) -> None:
    """Nothing, if the SDK that reads ``store`` is installed; else :class:`SourceError` naming the extra (a
    configuration that lists the store is refused at start, not every video read from it)."""
    if not installed(SDKS[store]):
        raise SourceError(f"{store}:// is read with {SDKS[store].split('.')[0]}, which is not installed: {EXTRA}")


def is_object_uri(uri: str) -> bool:
    """Whether ``uri`` names an object store (``s3://``, ``az://`` or ``gs://``)."""
    return scheme_of(uri) in STORES


@dataclass(frozen=True)
class ObjectURI:
    """An object as the allow-list checks it and the SDK reads it: its store, bucket (container) and key (blob)."""

    store: Store
    bucket: str
    key: str

    def __str__(self) -> str:
        return f"{self.store}://{self.bucket}/{self.key}"


def parse_object_uri(uri: str) -> ObjectURI:
    """The one parse of ``s3://bucket/key``, ``az://container/blob`` and ``gs://bucket/object``: the key is taken
    as written (object keys are names, not paths: nothing is decoded or normalised); :class:`SourceError` for a
    control character, an invalid bucket name, or an empty or over-long key."""
    scheme = scheme_of(uri)
    if scheme not in STORES or not uri[len(scheme) + 1 :].startswith("//"):
        raise SourceError(
            f"not an object store URI (s3://BUCKET/KEY, az://CONTAINER/BLOB, gs://BUCKET/OBJECT): {show(uri)}"
        )
    if CONTROL.search(uri):
        raise SourceError(f"control character in URI {show(uri)}")
    bucket, _, key = uri[len(scheme) + 3 :].partition("/")
    pattern = _GCS_BUCKET if scheme == "gs" else _BUCKET
    if not pattern.fullmatch(bucket) or (scheme == "az" and "." in bucket):
        raise SourceError(f"invalid {NAMES[scheme]} name {bucket[:64]!r} in {show(uri)}")
    if not key or len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise SourceError(f"{show(uri)} names no object (an empty key, or one over {MAX_KEY_BYTES} bytes)")
    return ObjectURI(scheme, bucket, key)  # type: ignore[arg-type]


def check_prefix(prefix: str) -> str:
    """An ``object_stores`` entry in the form it is compared in (a bare bucket gains its ``/``); :class:`SourceError`
    for one that is no ``s3://BUCKET/...``, ``az://CONTAINER/...`` or ``gs://BUCKET/...`` prefix."""
    scheme = scheme_of(prefix)
    bucket = prefix[len(scheme) + 3 :].partition("/")[0] if scheme in STORES else ""
    if not bucket or not prefix.startswith(f"{scheme}://"):
        raise SourceError(f"object store entry {show(prefix, 80)} is no s3://, az:// or gs:// BUCKET/PREFIX")
    parse_object_uri(f"{prefix.rstrip('/')}/x" if prefix.count("/") < 3 else f"{prefix}x")
    return prefix if prefix.count("/") >= 3 else f"{prefix}/"


def admit_object(uri: str, prefixes: Iterable[str]) -> ObjectURI:
    """``uri`` parsed, if it lies under one of ``prefixes`` (``sources.object_stores``); else :class:`SourceError`
    naming the store and the key. No network."""
    target = parse_object_uri(uri)
    allowed = [check_prefix(p) for p in prefixes]
    if not any(str(target).startswith(p) for p in allowed):
        listed = ", ".join(allowed) or "none: sources.object_stores is empty"
        raise SourceError(
            f"{NAMES[target.store]} {target.bucket!r}, key {target.key!r}: outside sources.object_stores ({listed})"
        )
    return target


@dataclass(frozen=True)
class StoreSettings:
    """How the SDKs are reached: the S3 endpoint (None: the SDK's chain, ``AWS_ENDPOINT_URL`` included) and its
    addressing style, the Azure account URL (None: ``AZURE_STORAGE_CONNECTION_STRING``, or
    ``https://$AZURE_STORAGE_ACCOUNT.blob.core.windows.net``), each read's timeout and the whole read's deadline."""

    s3_endpoint_url: str | None = None
    s3_addressing_style: str = "auto"
    azure_account_url: str | None = None
    timeout_s: float = 10.0
    total_s: float = 120.0


def read_object(uri: str, prefixes: Iterable[str], settings: StoreSettings, max_bytes: int | None) -> bytes:
    """The bytes of the object ``uri`` names, if it lies under ``prefixes``; else :class:`SourceError`,
    :class:`LimitExceeded` (over ``max_bytes``, by its size before the download) or :class:`SourceUnavailable`."""
    target = admit_object(uri, prefixes)
    deadline = time.monotonic() + settings.total_s
    where = f"{NAMES[target.store]} {target.bucket!r}, key {target.key!r}"
    read = {"s3": _read_s3, "az": _read_az, "gs": _read_gs}[target.store]
    try:
        return read(target, settings, max_bytes, deadline, where)
    except (SourceError, LimitExceeded, SourceUnavailable):
        raise
    except Exception as exc:  # the SDKs' own types, mapped by what they say of the object
        raise _mapped(exc, target.store, where) from exc


def _mapped(exc: Exception, store: Store, where: str) -> Exception:
    code, status = _code(exc)
    said = f"{code or type(exc).__name__}" + (f" (HTTP {status})" if status else "")
    if code in MISSING or status == 404:
        return SourceError(f"{where} ({store}): no such object or {NAMES[store]}: {said}")
    if code in DENIED or status in (401, 403):
        return SourceError(f"{where} ({store}): access denied: {said}")
    if code in CHANGED or status == 412:
        return SourceUnavailable(f"{where} ({store}): the object changed while it was read: {said}")
    if status is not None and 400 <= status < 500 and status not in (408, 429):
        return SourceError(f"{where} ({store}): refused by the store: {said}")
    return SourceUnavailable(f"{where} ({store}): the store did not answer: {said}: {_first_line(exc)}")


def _code(exc: Exception) -> tuple[str | None, int | None]:
    """The store's error code and HTTP status, as botocore's ``ClientError`` and azure-core's errors carry them."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):  # botocore
        error = response.get("Error", {})
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return str(error.get("Code") or "") or None, status
    if isinstance(getattr(exc, "code", None), int):  # google-api-core's GoogleAPICallError
        return type(exc).__name__, exc.code  # type: ignore[attr-defined]
    status = getattr(exc, "status_code", None)  # azure-core's HttpResponseError
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)  # (azure-storage-blob gives an enum member: its value is the code)
    return (str(code) if code else None), status


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


# -- S3 (boto3) -----------------------------------------------------------------------------------------------
@functools.cache
def s3_client(endpoint_url: str | None, addressing_style: str, timeout_s: float) -> Any:
    """One client per process and settings (boto3's clients are thread-safe; its credential chain is read once)."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=timeout_s,
        read_timeout=timeout_s,
        retries={"mode": "standard", "max_attempts": 3},
        s3={"addressing_style": addressing_style},
    )
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=config)


def _read_s3(target: ObjectURI, s: StoreSettings, max_bytes: int | None, deadline: float, where: str) -> bytes:
    client = s3_client(s.s3_endpoint_url, s.s3_addressing_style, s.timeout_s)
    head = client.head_object(Bucket=target.bucket, Key=target.key)
    size = int(head["ContentLength"])
    _check_size(size, max_bytes, where)
    if size == 0:
        return b""
    # at most one byte past the cap is ever sent, of the version HEAD measured; the answer's own length is checked
    # before its body is read (a size that HEAD gave wrong, or a server that ignores Range), so the one read that
    # follows is bounded by it (each of its socket reads by the timeout)
    ranged = {} if max_bytes is None else {"Range": f"bytes=0-{max_bytes}"}
    answer = client.get_object(Bucket=target.bucket, Key=target.key, IfMatch=head["ETag"], **ranged)
    body = answer["Body"]
    try:
        length = answer.get("ContentLength")
        if length is None or (max_bytes is not None and length > max_bytes):
            raise LimitExceeded(f"{where}: the store sends {length} bytes; the limit is {max_bytes}")
        if time.monotonic() > deadline:
            raise SourceError(f"{where}: download took longer than its deadline")
        return _whole(body.read(), size, where)
    finally:
        body.close()


# -- Azure Blob (azure-storage-blob) ------------------------------------------------------------------------------
@functools.cache
def azure_client(account_url: str | None, timeout_s: float) -> Any:
    from azure.storage.blob import BlobServiceClient

    options: dict[str, Any] = {"connection_timeout": timeout_s, "read_timeout": timeout_s, "retry_total": 2}
    connection = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if connection and account_url is None:
        return BlobServiceClient.from_connection_string(connection, **options)
    account = os.environ.get("AZURE_STORAGE_ACCOUNT")
    url = account_url or (f"https://{account}.blob.core.windows.net" if account else None)
    if url is None:
        raise SourceError(
            "no Azure account: set sources.azure_account_url, AZURE_STORAGE_ACCOUNT or AZURE_STORAGE_CONNECTION_STRING"
        )
    from azure.identity import DefaultAzureCredential

    return BlobServiceClient(url, credential=DefaultAzureCredential(), **options)


def _read_az(target: ObjectURI, s: StoreSettings, max_bytes: int | None, deadline: float, where: str) -> bytes:
    from azure.core import MatchConditions

    blob = azure_client(s.azure_account_url, s.timeout_s).get_blob_client(target.bucket, target.key)
    props = blob.get_blob_properties()
    size = int(props.size)
    _check_size(size, max_bytes, where)
    if size == 0:
        return b""
    length = None if max_bytes is None else max_bytes + 1
    stream = blob.download_blob(
        offset=0, length=length, etag=props.etag, match_condition=MatchConditions.IfNotModified, max_concurrency=1
    )
    return _whole(read_bounded(_chunks(stream.chunks()), max_bytes, where, deadline), size, where)


# -- Google Cloud Storage (google-cloud-storage) --------------------------------------------------------------------
@functools.cache
def gcs_client(timeout_s: float) -> Any:
    """Application Default Credentials (an emulator's ``STORAGE_EMULATOR_HOST``: none needed)."""
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import storage

    try:
        return storage.Client()
    except DefaultCredentialsError as exc:
        raise SourceError(f"gs: no Application Default Credentials ({_first_line(exc)})") from exc


def _read_gs(target: ObjectURI, s: StoreSettings, max_bytes: int | None, deadline: float, where: str) -> bytes:
    from google.cloud.storage.retry import DEFAULT_RETRY

    retry = DEFAULT_RETRY.with_timeout(max(deadline - time.monotonic(), 0.001))  # (its own default waits 120 s)
    blob = gcs_client(s.timeout_s).bucket(target.bucket).get_blob(target.key, timeout=s.timeout_s, retry=retry)
    if blob is None:
        raise SourceError(f"{where} (gs): no such object or bucket")
    size = int(blob.size or 0)
    _check_size(size, max_bytes, where)
    if size == 0:
        return b""
    end = None if max_bytes is None else max_bytes  # (inclusive: at most one byte past the cap)
    data = blob.download_as_bytes(
        start=0, end=end, if_generation_match=blob.generation, timeout=s.timeout_s, retry=retry, checksum=None
    )
    if max_bytes is not None and len(data) > max_bytes:
        raise LimitExceeded(f"{where} exceeds the {max_bytes}-byte limit")
    return _whole(data, size, where)


def _chunks(chunks: Iterator[bytes]) -> Any:
    """``read(n)`` over an iterator of chunks (what :func:`read_bounded` reads with)."""
    return lambda _n: next(chunks, b"")


def _whole(data: bytes, size: int, where: str) -> bytes:
    """``data``, if it is as long as the object's size said (else a part of another version, or of none)."""
    if len(data) != size:
        raise SourceUnavailable(f"{where}: {len(data)} bytes read of the {size} its size said (changed meanwhile?)")
    return data


def _check_size(size: int, max_bytes: int | None, where: str) -> None:
    if max_bytes is not None and size > max_bytes:
        raise LimitExceeded(f"{where} is {size} bytes; the limit is {max_bytes} (refused before the download)")
