"""The object target's own data-plane requests (`s3_requests.py`) against the local RGW,
beside boto3's: a restore point's chunks and manifest written by boto3 (as workers before
them wrote) are read by them, and what they write boto3 reads back the same; sizes,
missing keys, deletes and refused credentials come out as before."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.errors import StorageUnavailable
from services.storage.object_keys import TargetKeys
from services.storage.object_layout import chunk_key, manifest_key
from services.storage.s3 import Bucket
from tests.support import rgw
from worker.engine.chunk_store import ObjectManifest
from worker.engine.chunks import SEALING_OVERHEAD, ChunkCodec

KEYS = TargetKeys.from_data_key("compat", os.urandom(32))
PROJECT = "project odd+chars é"


@pytest.fixture
def bucket() -> Iterator[Bucket]:
    with rgw.scratch_bucket() as scratch:
        yield scratch


def _boto3_put(bucket: Bucket, key: str, data: bytes) -> None:
    rgw.holder(bucket).put_object(Bucket=bucket.settings.bucket,
                              Key=f"{bucket.settings.prefix}/{key}", Body=data)


def _restore_point(codec: ChunkCodec) -> tuple[ObjectManifest, dict[str, bytes]]:
    """Chunks of 4 MiB, 1 MiB and a short last one, compressible and not."""
    plaintexts = [os.urandom(4 << 20), b"cairn " * (1 << 18), os.urandom(12345)]
    manifest = ObjectManifest(4 << 20, (8 << 20) + 12345)
    data: dict[str, bytes] = {}
    for index, plaintext in enumerate(plaintexts):
        name = codec.name(PROJECT, plaintext)
        manifest.chunks[index] = name
        data[name] = plaintext
    return manifest, data


@pytest.mark.parametrize("writer", ["boto3", "lean"])
def test_a_restore_point_written_by_either_path_reads_back_by_the_other(
        bucket: Bucket, writer: str) -> None:
    codec = ChunkCodec(KEYS)
    manifest, data = _restore_point(codec)
    sealed_manifest = codec.seal(b"manifest", manifest_key(PROJECT, "rp-1"), manifest.to_bytes())
    blobs = {name: codec.seal_chunk(PROJECT, plaintext, name).blob
             for name, plaintext in data.items()}
    for name, blob in blobs.items():
        if writer == "boto3":
            _boto3_put(bucket, chunk_key(PROJECT, name), bytes(blob))
        else:
            bucket.put(chunk_key(PROJECT, name), blob)
    if writer == "boto3":
        _boto3_put(bucket, manifest_key(PROJECT, "rp-1"), bytes(sealed_manifest))
    else:
        bucket.put(manifest_key(PROJECT, "rp-1"), sealed_manifest)

    for name, plaintext in data.items():
        key = chunk_key(PROJECT, name)
        if writer == "boto3":  # read by the lean path
            assert bucket.size(key) == len(blobs[name])
            blob = bucket.get(key, limit=len(plaintext) + SEALING_OVERHEAD)
            assert blob is not None
        else:  # read by boto3
            blob = rgw.stored(bucket, key)
            assert blob is not None
            assert rgw.holder(bucket).head_object(
                Bucket=bucket.settings.bucket,
                Key=f"{bucket.settings.prefix}/{key}")["ContentLength"] == len(blob)
        assert codec.open_chunk(PROJECT, name, blob) == plaintext
    key = manifest_key(PROJECT, "rp-1")
    stored = bucket.get(key, limit=1 << 20) if writer == "boto3" else rgw.stored(bucket, key)
    assert stored is not None
    assert ObjectManifest.from_bytes(codec.open(b"manifest", key, stored), "m") == manifest


def test_missing_keys_deletes_and_refused_credentials_as_before(
        bucket: Bucket, tmp_path: Path) -> None:
    assert bucket.get("chunks/none", limit=10) is None
    assert bucket.size("chunks/none") is None
    bucket.put("chunks/gone", b"x")
    bucket.delete("chunks/gone")
    bucket.delete("chunks/gone")  # gone already: no error
    assert rgw.stored(bucket, "chunks/gone") is None
    assert bucket.get("chunks/gone", limit=10) is None

    keys = json.loads(rgw.CREDENTIALS.read_text())
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**keys, "secret_key": keys["secret_key"] + "x"}))
    refused = Bucket(bucket.settings.model_copy(update={"credentials_file": wrong}))
    try:
        for call in (lambda: refused.put("chunks/x", b"x"), lambda: refused.size("chunks/x"),
                     lambda: refused.get("chunks/x", limit=1)):
            with pytest.raises(StorageUnavailable, match="check the target's credentials"):
                call()
    finally:
        refused.close()
