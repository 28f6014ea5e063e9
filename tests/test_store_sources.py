"""Object stores as sources, against real servers: moto's S3 API and Azurite's Blob API (tests/support/stores.py).

Process layer: each test module starts its servers (moto in about 2 s, Azurite in about 1 s) once."""

from __future__ import annotations

import json
import os

import boto3
import pytest
from azure.storage.blob import BlobServiceClient

from gateway.core.sources import SourceError, SourceUnavailable, fetch
from gateway.core.sources.stores import StoreSettings, _mapped, azure_client, gcs_client, read_object, s3_client
from tests.support.stores import (
    AZURITE_KEY,
    S3_ENV,
    Proxy,
    azurite,
    azurite_connection,
    free_port,
    gcs_emulator,
    moto_s3,
)
from transforms.errors import LimitExceeded

SECRET = "planted-aws-secret-5a1f0c"  # the secret key every S3 client of this module signs with
MB = 1 << 20


@pytest.fixture(autouse=True)
def _credentials(monkeypatch):
    for k, v in {**S3_ENV, "AWS_SECRET_ACCESS_KEY": SECRET}.items():
        monkeypatch.setenv(k, v)
    for client in (s3_client, azure_client, gcs_client):
        client.cache_clear()
    yield
    for client in (s3_client, azure_client, gcs_client):
        client.cache_clear()


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    os.environ.update({**S3_ENV, "AWS_SECRET_ACCESS_KEY": SECRET})
    with moto_s3(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket="uploads")
        client.put_object(Bucket="uploads", Key="videos/a.mp4", Body=b"a" * 5000)
        client.put_object(Bucket="uploads", Key="private/b.mp4", Body=b"b" * 10)
        client.create_bucket(Bucket="locked")
        client.put_object(Bucket="locked", Key="videos/c.mp4", Body=b"c" * 10)
        deny = {"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::locked/*"}
        client.put_bucket_policy(Bucket="locked", Policy=json.dumps({"Version": "2012-10-17", "Statement": [deny]}))
        yield endpoint, client


@pytest.fixture(scope="module")
def az(tmp_path_factory):
    with azurite(tmp_path_factory.mktemp("azurite")) as connection:
        service = BlobServiceClient.from_connection_string(connection)
        service.create_container("media")
        service.get_blob_client("media", "clips/a.mp4").upload_blob(b"z" * 3000)
        yield connection


PREFIXES = ["s3://uploads/videos/", "s3://locked", "az://media/clips/", "gs://footage/clips/"]


def _s3_read(endpoint: str, uri: str, max_bytes: int | None = None) -> bytes:
    return read_object(uri, PREFIXES, StoreSettings(s3_endpoint_url=endpoint, timeout_s=5, total_s=30), max_bytes)


def test_an_s3_object_under_a_listed_prefix_is_read_through_the_fetch_of_every_source(s3):
    endpoint, _ = s3
    stores = StoreSettings(s3_endpoint_url=endpoint)
    assert fetch("s3://uploads/videos/a.mp4", object_stores=PREFIXES, stores=stores) == b"a" * 5000


@pytest.mark.parametrize(
    ("uri", "said"),
    [
        ("s3://uploads/private/b.mp4", "outside sources.object_stores"),  # it exists: never asked for
        ("s3://uploads/videos/missing.mp4", "no such object"),
        ("s3://locked/videos/c.mp4", "access denied"),  # a bucket policy denies s3:GetObject
    ],
)
def test_each_refusal_names_the_store_and_the_key(s3, uri, said):
    endpoint, _ = s3
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    with pytest.raises(SourceError) as caught:
        _s3_read(endpoint, uri)
    assert said in str(caught.value)
    assert f"bucket {bucket!r}, key {key!r}" in str(caught.value)
    assert not isinstance(caught.value, SourceUnavailable)


def test_wrong_credentials_are_a_denial_and_the_secret_is_in_no_error(tmp_path, monkeypatch):
    checking = moto_s3(tmp_path / "moto.log", INITIAL_NO_AUTH_ACTION_COUNT="0")  # moto checks credentials
    with checking as endpoint, pytest.raises(SourceError, match=r"access denied") as caught:
        _s3_read(endpoint, "s3://uploads/videos/a.mp4")
    assert SECRET not in str(caught.value) and "AKIATESTING" not in str(caught.value)


def test_a_store_that_slows_down_then_answers_is_read(s3):
    endpoint, _ = s3
    with Proxy(endpoint, fail=2) as proxy:  # (the SDK's own retries, with its backoff)
        assert _s3_read(proxy.url, "s3://uploads/videos/a.mp4") == b"a" * 5000
    assert proxy.requests[:2] == ["HEAD", "HEAD"] and len(proxy.requests) == 4


def test_a_store_that_keeps_slowing_down_is_unavailable_not_the_videos_fault(s3):
    endpoint, _ = s3
    with Proxy(endpoint, fail=100) as proxy, pytest.raises(SourceUnavailable, match=r"HTTP 503"):
        _s3_read(proxy.url, "s3://uploads/videos/a.mp4")
    assert proxy.requests == ["HEAD"] * 4  # a request and the SDK's 3 retries (backing off between), then no verdict


def test_an_unreachable_endpoint_is_unavailable():
    with pytest.raises(SourceUnavailable, match=r"did not answer"):
        _s3_read(f"http://127.0.0.1:{free_port()}", "s3://uploads/videos/a.mp4")


def test_an_object_over_the_limit_is_refused_by_its_size_before_the_download(s3):
    endpoint, client = s3
    client.put_object(Bucket="uploads", Key="videos/big.mp4", Body=b"\0" * (200 * MB))
    with Proxy(endpoint) as proxy, pytest.raises(LimitExceeded, match=r"refused before the download"):
        _s3_read(proxy.url, "s3://uploads/videos/big.mp4", max_bytes=100 * MB)
    assert proxy.requests == ["HEAD"] and proxy.body_bytes == 0


def test_no_more_than_the_cap_is_read_when_the_size_asked_first_was_wrong(s3):
    endpoint, client = s3
    client.put_object(Bucket="uploads", Key="videos/grown.mp4", Body=b"\0" * (3 * MB))
    lying = Proxy(endpoint, head_length=1000)  # HEAD says 1000 bytes: the read itself must stop at the cap
    with lying as proxy, pytest.raises(LimitExceeded, match=r"the store sends 1048577 bytes; the limit is 1048576"):
        _s3_read(proxy.url, "s3://uploads/videos/grown.mp4", max_bytes=MB)
    assert proxy.body_bytes <= MB + 1


def test_an_azure_blob_is_read_and_its_refusals_name_the_container_and_the_blob(az, monkeypatch):
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", az)
    settings = StoreSettings(timeout_s=5, total_s=30)
    assert read_object("az://media/clips/a.mp4", PREFIXES, settings, None) == b"z" * 3000
    assert read_object("az://media/clips/a.mp4", PREFIXES, settings, 10_000) == b"z" * 3000
    with pytest.raises(SourceError, match=r"container 'media', key 'clips/missing.mp4'.*no such object"):
        read_object("az://media/clips/missing.mp4", PREFIXES, settings, None)
    with pytest.raises(SourceError, match=r"container 'media', key 'other/a.mp4': outside sources.object_stores"):
        read_object("az://media/other/a.mp4", PREFIXES, settings, None)
    with pytest.raises(LimitExceeded, match=r"3000 bytes; the limit is 100"):
        read_object("az://media/clips/a.mp4", PREFIXES, settings, 100)


def test_a_wrong_azure_key_is_a_denial_and_the_key_is_in_no_error(az, monkeypatch):
    wrong = "A" * 86 + "=="
    endpoint = az.split("BlobEndpoint=")[1].rstrip(";")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite_connection(endpoint, wrong))
    with pytest.raises(SourceError, match=r"container 'media', key 'clips/a.mp4'.*access denied") as caught:
        read_object("az://media/clips/a.mp4", PREFIXES, StoreSettings(timeout_s=5, total_s=30), None)
    assert wrong not in str(caught.value) and AZURITE_KEY not in str(caught.value)


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    with gcs_emulator(tmp_path_factory.mktemp("gcs") / "gcs.log") as url:
        from google.cloud import storage

        os.environ["STORAGE_EMULATOR_HOST"] = url
        try:
            bucket = storage.Client(project="test").create_bucket("footage")
            bucket.blob("clips/a.mp4").upload_from_string(b"g" * 4000)
            bucket.blob("clips/big.mp4").upload_from_string(b"\0" * (2 * MB))
            yield url
        finally:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)


def test_a_gcs_object_is_read_and_its_refusals_name_the_bucket_and_the_object(gcs, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs)
    settings = StoreSettings(timeout_s=5, total_s=30)
    assert read_object("gs://footage/clips/a.mp4", PREFIXES, settings, 10_000) == b"g" * 4000
    with pytest.raises(SourceError, match=r"bucket 'footage', key 'clips/missing.mp4' \(gs\): no such object"):
        read_object("gs://footage/clips/missing.mp4", PREFIXES, settings, None)
    with pytest.raises(SourceError, match=r"bucket 'footage', key 'raw/a.mp4': outside sources.object_stores"):
        read_object("gs://footage/raw/a.mp4", PREFIXES, settings, None)
    with pytest.raises(LimitExceeded, match=r"2097152 bytes; the limit is 1048576 \(refused before the download\)"):
        read_object("gs://footage/clips/big.mp4", PREFIXES, settings, MB)


def test_a_gcs_store_that_slows_down_then_answers_is_read(gcs, monkeypatch):
    with Proxy(gcs, fail=2) as proxy:  # (google-cloud-storage's own retry, with its backoff)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        assert read_object("gs://footage/clips/a.mp4", PREFIXES, StoreSettings(timeout_s=5, total_s=30), None)
    # two 503s, then the object's metadata (its media may be fetched from the link the metadata names)
    assert proxy.requests[:3] == ["GET", "GET", "GET"]


def test_each_sdks_refusal_maps_to_the_videos_error_and_an_outage_to_no_verdict():
    from azure.core.exceptions import HttpResponseError
    from botocore.exceptions import ClientError
    from google.api_core import exceptions as google

    def s3(code: str, status: int) -> Exception:
        return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")

    def az(status: int) -> Exception:
        error = HttpResponseError(message="x")
        error.status_code = status
        return error

    for exc, store in ((s3("AccessDenied", 403), "s3"), (az(403), "az"), (google.Forbidden("no"), "gs")):
        assert "access denied" in str(_mapped(exc, store, "w")) and type(_mapped(exc, store, "w")) is SourceError
    for exc, store in ((s3("SlowDown", 503), "s3"), (az(503), "az"), (google.ServiceUnavailable("busy"), "gs")):
        assert isinstance(_mapped(exc, store, "w"), SourceUnavailable)
    for exc, store in ((s3("NoSuchKey", 404), "s3"), (az(404), "az"), (google.NotFound("gone"), "gs")):
        assert "no such object" in str(_mapped(exc, store, "w"))
    assert isinstance(_mapped(google.TooManyRequests("slow"), "gs", "w"), SourceUnavailable)


def test_bench_sources_reads_the_object_with_each_target_and_says_the_ratios(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "sources.json"
    cmd = [sys.executable, "-m", "gateway.cli", "bench", "sources", "--mb", "2", "--repeats", "1", "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    report = json.loads(out.read_text())
    assert done.returncode == (0 if report["met"] else 1), done.stderr  # (a slower read than 0.8x exits 1)
    assert report["object"]["bytes"] == 2 * MB and set(report["targets"]) == {"lastmile", "sdk_get", "sdk_download"}
    assert all(t["wall_s"] > 0 and t["peak_rss_mb"] > 0 for t in report["targets"].values())
    ratio = report["targets"]["sdk_get"]["wall_s"] / report["targets"]["lastmile"]["wall_s"]
    assert report["speed_vs_sdk_get"] == pytest.approx(ratio, abs=1e-3)
    assert report["met"] == (min(report["speed_vs_sdk_get"], report["speed_vs_sdk_download"]) >= 0.8)


def test_a_store_whose_sdk_is_missing_is_refused_with_the_configuration(monkeypatch):
    from pydantic import ValidationError

    from gateway.core.config import GatewayConfig
    from gateway.core.sources import stores

    monkeypatch.setitem(stores.SDKS, "az", "no_such_sdk.blob")
    GatewayConfig(sources={"object_stores": ["s3://uploads/"]})  # (its own SDK is there)
    with pytest.raises(ValidationError) as caught:
        GatewayConfig(sources={"object_stores": ["s3://uploads/", "az://media"]})
    assert "az:// is read with no_such_sdk, which is not installed: pip install 'lastmile-gateway[attach]'" in str(
        caught.value
    )
