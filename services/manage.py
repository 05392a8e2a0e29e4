"""`cairn-manage`: operator commands.

    cairn-manage db upgrade [REVISION]     apply migrations (default: head)
    cairn-manage db downgrade REVISION     revert migrations
    cairn-manage db current                show the database's revision
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from alembic import command
from alembic.config import Config

import migrations
from services.settings import get_settings


def alembic_config(database_url: str | None = None) -> Config:
    directory = Path(migrations.__file__).parent
    config = Config(str(directory / "alembic.ini"))
    config.set_main_option("script_location", str(directory))
    config.set_main_option("sqlalchemy.url",
                           (database_url or get_settings().database_url).replace("%", "%%"))
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
    args = parser.parse_args(argv)

    config = alembic_config()
    if args.action == "upgrade":
        command.upgrade(config, args.revision)
    elif args.action == "downgrade":
        command.downgrade(config, args.revision)
    else:
        command.current(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
