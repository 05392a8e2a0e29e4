"""The local stack's S3 endpoint (Ceph RGW on ceph-a, `deploy/local/rgw.sh`) for tests."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from services.base import Base
from services.db import Database
from services.settings import S3Settings
from services.storage.s3 import Bucket
from tests.support.ceph import STATE

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
        for stored in list(bucket.list()):
            bucket.delete(stored.key)
        bucket.close()


def stored(bucket: Bucket, key: str) -> bytes | None:
    """An object under the bucket's prefix as RGW holds it, whatever its size (as the
    bucket's holder reads it, not through Cairn's bounded reads)."""
    s3 = bucket._client  # the holder's view, not Cairn's
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
