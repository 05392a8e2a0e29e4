"""`cairn-manage webhooks keys|reseal`: the webhook secrets' key ring, with no more settings
than the database's URL (CAIRN_DATABASE_URL) and the key file
(CAIRN_WEBHOOK_SECRET_KEY_FILE), as `cairn-manage db upgrade` runs."""

from __future__ import annotations

import sys

from services.db import Database
from services.errors import CairnError
from services.settings import database_url_from_environment
from services.webhooks import keys, sealing


def main(action: str) -> int:
    try:
        keyring = sealing.from_environment()
    except CairnError as exc:
        return _fail(exc.message)
    db = Database(database_url_from_environment(), pool_size=1)
    try:
        if action == "keys":
            return _show(db, keyring)
        if keyring is None:
            return _fail(f"{sealing.SETTING} is not set: name the key file whose first key "
                         "the secrets are to be sealed under")
        return _reseal(db, keyring)
    finally:
        db.dispose()


def _show(db: Database, keyring: sealing.Keyring | None) -> int:
    with db.session() as session:
        use = keys.key_use(session)
    print(f"deployment's key: {use.recorded or '(none recorded yet)'}")
    if keyring is None:
        print(f"key file: {sealing.SETTING} is not set")
    else:
        print("key file: " + ", ".join(
            f"{kid} ({'seals' if kid == keyring.current else 'opens'})"
            for kid in keyring.ids))
    for kid, count in sorted(use.sealed.items()):
        held = keyring is not None and kid in keyring.ids
        print(f"  {count} webhooks sealed under {kid}" + ("" if held else "  (NOT in the file)"))
    return 0


def _reseal(db: Database, keyring: sealing.Keyring) -> int:
    done = keys.reseal(db, keyring)
    print(f"resealed {done.resealed} webhooks under {keyring.current}; {done.already} "
          "already were")
    if done.failed:
        for webhook_id, why in sorted(done.failed.items()):
            print(f"  webhook {webhook_id}: {why}", file=sys.stderr)
        return _fail(f"{len(done.failed)} webhooks open under no key of the file: add the "
                     "key they were sealed under to it (after the first line) and run this "
                     f"again; {keyring.current} was not recorded as the deployment's key")
    print(f"{keyring.current} is the deployment's webhook key. Every cairn-api must already "
          "seal under it (this file, this key first): then the file's other keys may go")
    return 0


def _fail(message: str) -> int:
    print(f"cairn-manage: {message}", file=sys.stderr)
    return 1
