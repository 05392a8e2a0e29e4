"""`openstack protection volume …`, `backup create`, `target list`, `usage show`, `quota …`:
the project's volumes, an on-demand backup, and what protecting them takes and costs.

A volume is named as `openstack volume show` takes it: its Cinder name or id (or, for an
administrator, the RBD image `cluster/pool/image`)."""

from __future__ import annotations

import argparse
from typing import Any

from osc_lib import exceptions

from cairnclient.osc.common import (
    Column,
    Lister,
    ShowOne,
    add_qos,
    add_wait,
    field,
    given,
    limit,
    listed,
    one,
    qos,
)

VOLUME_COLUMNS: list[Column] = [
    ("ID", field("id")), ("Name", field("name")), ("Size (GiB)", field("size_gb")),
    ("Status", field("status")), ("Protected", field("protected")),
    ("Plans", lambda v: ", ".join(p["name"] for p in v.get("plans") or [])),
    ("Restore points", field("restore_points")),
    ("Newest restore point", lambda v: (v.get("newest_restore_point") or {}).get("created_at"))]
TARGET_COLUMNS: list[Column] = [
    ("Name", field("name")), ("Kind", field("kind")), ("Default", field("default")),
    ("Jobs at once", field("max_jobs"))]


class ListVolume(Lister):
    """List your project's Cinder volumes and their protection"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("--unprotected", action="store_true",
                            help="Only volumes no enabled plan covers")
        parser.add_argument("--name", metavar="<name>", help="Only volumes of this name")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return listed(VOLUME_COLUMNS, self.cairn.volumes.list(
            unprotected=parsed_args.unprotected, name=parsed_args.name))


class ShowVolume(ShowOne):
    """Show a volume's protection"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("volume", metavar="<volume>", help="Volume (name or id)")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        client = self.cairn
        return one(client.volumes.get(client.volumes.resolve(parsed_args.volume)))


class CreateBackup(ShowOne):
    """Back up a volume now (an incremental unless --full)"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("volume", metavar="<volume>", help="Volume (name or id)")
        parser.add_argument("--full", action="store_true",
                            help="A full copy instead of an incremental")
        parser.add_argument("--target", metavar="<target>",
                            help="Backup target (default: the service's)")
        add_qos(parser, "backup")
        add_wait(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        client = self.cairn
        job = client.backups.create(
            client.volumes.resolve(parsed_args.volume),
            kind="full" if parsed_args.full else "incremental", target=parsed_args.target,
            qos=qos(parsed_args))
        return one(self.finish(job, parsed_args))


class ListTarget(Lister):
    """List the backup targets a plan, backup or copy may name"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return listed(TARGET_COLUMNS, self.cairn.targets())


class ShowUsage(ShowOne):
    """Show your project's quota and what it uses"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.quotas.usage())


class _Quota(ShowOne):
    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("project", metavar="<project-id>", help="Project (id)")
        return parser


class ShowQuota(_Quota):
    """Show a project's quota and usage (administrators)"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.quotas.get(parsed_args.project))


class SetQuota(_Quota):
    """Set a project's limits; one not given stays (administrators)"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--restore-points", type=limit(0), metavar="<count>",
                            help="Restore points the project may hold ('none': no limit)")
        parser.add_argument("--gigabytes", metavar="<gib>",
                            help="Storage in GiB, fractions allowed ('none': no limit)")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        points, gigabytes = parsed_args.restore_points, parsed_args.gigabytes
        if points is None and gigabytes is None:
            raise exceptions.CommandError("give --restore-points and/or --gigabytes")
        limits = self.cairn.quotas.get(parsed_args.project)["limits"]
        new_points = limits["restore_points"] if points is None else given(points)
        new_gigabytes = limits["gigabytes"]
        if gigabytes is not None:
            try:
                new_gigabytes = None if gigabytes.lower() == "none" else float(gigabytes)
            except ValueError:
                raise exceptions.CommandError(f"--gigabytes {gigabytes!r} is not a number "
                                              "(or 'none')") from None
        return one(self.cairn.quotas.set(parsed_args.project, restore_points=new_points,
                                         gigabytes=new_gigabytes))
