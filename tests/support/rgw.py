"""The local stack's S3 endpoint (Ceph RGW on ceph-a, `deploy/local/rgw.sh`) for tests."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from services.base import Base
from services.db import Database
from services.settings import S3Settings
from services.storage.s3 import Bucket
from tests.support.ceph import STATE

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

CREDENTIALS = STATE / "rgw-ceph-a" / "s3.json"
OPERATOR_KEY = bytes(range(32))
"""The operator's key of the tests' object targets."""


def settings(prefix: str, credentials: Path = CREDENTIALS) -> S3Settings:
    local = json.loads(CREDENTIALS.read_text())
    return S3Settings(endpoint=local["endpoint"], bucket=local["bucket"],
                      region=local["region"], prefix=prefix, credentials_file=credentials,
                      timeout_seconds=10)


@contextmanager
def scratch_bucket() -> Iterator[Bucket]:
    """The local bucket under a prefix of the test's own; everything under it is removed
    afterwards."""
    bucket = Bucket(settings(f"test-{uuid.uuid4().hex[:10]}"))
    try:
        yield bucket
    finally:
        for stored in list(bucket.list(deadline=math.inf)):
            bucket.delete(stored.key)
        bucket.close()


def holder(bucket: Bucket) -> S3Client:
    """boto3, with the bucket's credentials: the bucket holder's view of what is stored,
    not through Cairn's bounded requests."""
    return _holder(bucket.settings.endpoint, bucket.settings.region,
                   bucket.settings.credentials_file)


@lru_cache(maxsize=8)
def _holder(endpoint: str, region: str, credentials_file: Path) -> S3Client:
    credentials = json.loads(Path(credentials_file).read_text())
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name=region,
        aws_access_key_id=credentials["access_key"],
        aws_secret_access_key=credentials["secret_key"],
        config=Config(s3={"addressing_style": "path"}, proxies={},
                      request_checksum_calculation="when_required",
                      response_checksum_validation="when_required"))


def stored(bucket: Bucket, key: str) -> bytes | None:
    """An object under the bucket's prefix as RGW holds it, whatever its size (as the
    bucket's holder reads it, not through Cairn's bounded reads)."""
    s3 = holder(bucket)
    try:
        answer = s3.get_object(Bucket=bucket.settings.bucket,
                               Key=f"{bucket.settings.prefix}/{key}")
    except s3.exceptions.NoSuchKey:
        return None
    data: bytes = answer["Body"].read()
    return data


@contextmanager
def key_database(directory: Path) -> Iterator[Database]:
    """A database of its own (SQLite in `directory`) for what opens object stores without
    the stack's: it records each target's data key, as Cairn's database does."""
    db = Database(f"sqlite:///{directory / 'keys.db'}")
    import services.records  # noqa: F401  (every table in the metadata)

    Base.metadata.create_all(db.engine)
    try:
        yield db
    finally:
        db.engine.dispose()
