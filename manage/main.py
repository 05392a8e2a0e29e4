"""`cairn-manage`: operator commands.

    cairn-manage db upgrade [REVISION]     apply migrations (default: head)
    cairn-manage db downgrade REVISION     revert migrations
    cairn-manage db current                show the database's revision
    cairn-manage keystone register --url URL [--region R] [--os-cloud C]
                                           add Cairn to the Keystone catalog (service
                                           type `volume-backup`), with an administrator's
                                           credentials from clouds.yaml or OS_*
    cairn-manage webhooks keys             the deployment's webhook key, the keys in
                                           CAIRN_WEBHOOK_SECRET_KEY_FILE and the webhooks
                                           sealed under each
    cairn-manage webhooks reseal           seal every webhook's secrets under the key
                                           file's first key, and record it as the
                                           deployment's (a key rotation's last step
                                           before the old key goes: docs/deploy.md)
    cairn-manage object-key export TARGET --out FILE
                                           write the object target's data key object as
                                           Cairn's database records it (wrapped by the
                                           operator's key), to put back in the bucket
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from alembic import command
from alembic.config import Config

import migrations
from cairnclient import config as cloud_config
from manage import webhook_keys
from services.db import Database
from services.openstack.identity import IdentityAdmin
from services.openstack.sessions import make_session
from services.settings import database_url_from_environment
from services.storage import key_records
from services.storage.object_layout import DATA_KEY


def alembic_config(database_url: str | None = None) -> Config:
    directory = Path(migrations.__file__).parent
    config = Config(str(directory / "alembic.ini"))
    config.set_main_option("script_location", str(directory))
    config.set_main_option("sqlalchemy.url",
                           (database_url or database_url_from_environment()).replace("%", "%%"))
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cairn-manage", description="Cairn operator commands")
    sub = parser.add_subparsers(dest="area", required=True)
    db = sub.add_parser("db", help="database schema").add_subparsers(dest="action", required=True)
    up = db.add_parser("upgrade", help="apply migrations")
    up.add_argument("revision", nargs="?", default="head")
    down = db.add_parser("downgrade", help="revert migrations")
    down.add_argument("revision")
    db.add_parser("current", help="show the current revision")
    ks = sub.add_parser("keystone", help="the Keystone catalog").add_subparsers(
        dest="action", required=True)
    reg = ks.add_parser("register", help="create Cairn's service and endpoints in the catalog")
    reg.add_argument("--url", required=True,
                     help="Cairn's API URL as clients reach it, e.g. https://cairn.example:8787")
    reg.add_argument("--internal-url", help="URL for the internal interface (default: --url)")
    reg.add_argument("--region", default=None, help="Keystone region of the endpoints")
    reg.add_argument("--os-cloud", default=None, help="cloud in clouds.yaml (default OS_CLOUD, "
                     "else the OS_* variables)")
    hooks = sub.add_parser("webhooks", help="webhook secrets' keys").add_subparsers(
        dest="action", required=True)
    hooks.add_parser("keys", help="which keys seal which webhooks' secrets")
    hooks.add_parser("reseal", help="seal every webhook's secrets under the current key")
    keys = sub.add_parser("object-key", help="object targets' data keys").add_subparsers(
        dest="action", required=True)
    export = keys.add_parser("export", help="write a target's data key object as Cairn's "
                             "database records it")
    export.add_argument("target", help="the object target's name")
    export.add_argument("--out", required=True, type=Path,
                        help="a new file (an existing one is not overwritten)")
    args = parser.parse_args(argv)

    if args.area == "keystone":
        return _register(args)
    if args.area == "webhooks":
        return webhook_keys.main(args.action)
    if args.area == "object-key":
        return _export_key(args.target, args.out)
    config = alembic_config()
    if args.action == "upgrade":
        command.upgrade(config, args.revision)
    elif args.action == "downgrade":
        command.downgrade(config, args.revision)
    else:
        command.current(config)
    return 0


def _export_key(target: str, out: Path) -> int:
    """The copy of `keys/data-key` the database keeps: an operator puts it back in the
    bucket (`aws s3 cp FILE s3://<bucket>/<prefix>/keys/data-key`) when the bucket lost or
    replaced it. Useless without the operator's key."""
    db = Database(database_url_from_environment())
    try:
        record = key_records.get(db, target)
    finally:
        db.engine.dispose()
    if record is None:
        print(f"cairn-manage: Cairn's database records no data key for object target "
              f"{target!r} (no job has opened it yet, or no such target)", file=sys.stderr)
        return 1
    try:
        with out.open("xb") as file:
            file.write(record.wrapped)
    except OSError as exc:
        print(f"cairn-manage: cannot write {out}: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {out}: the data key of object target {target!r} (fingerprint "
          f"{record.fingerprint}, {record.origin} on {record.created_at:%Y-%m-%d %H:%M} UTC); "
          f"put it back as {DATA_KEY} under the target's prefix")
    return 0


def _register(args: argparse.Namespace) -> int:
    try:
        cloud = cloud_config.load(args.os_cloud)
    except cloud_config.CloudConfigError as exc:
        print(f"cairn-manage: {exc}", file=sys.stderr)
        return 2
    session = make_session(cloud.auth, verify=cloud.verify)
    admin = IdentityAdmin(session, region=args.region or cloud.region_name)
    try:
        if admin.region is not None:
            admin.ensure_region(admin.region)
        service_id = admin.ensure_service(cloud_config.SERVICE_TYPE, "cairn",
                                          "Cairn: backups of block storage volumes")
        admin.ensure_endpoints(service_id, args.url, ("public", "admin"))
        admin.ensure_endpoints(service_id, args.internal_url or args.url, ("internal",))
    except Exception as exc:  # keystoneauth raises plain Exception for some bad options
        print(f"cairn-manage: registering in Keystone failed: {exc}", file=sys.stderr)
        return 1
    print(f"registered service {cloud_config.SERVICE_TYPE} ({service_id}) at {args.url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
