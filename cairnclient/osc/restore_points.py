"""`openstack protection restore point …`: the copies; each verified, locked, copied off
site, restored or deleted. Commands that start a job show it; with --wait they follow it to
its end."""

from __future__ import annotations

import argparse
from typing import Any

from osc_lib import exceptions

from cairnclient.client import JSON
from cairnclient.osc.common import (
    Column,
    Lister,
    ShowOne,
    add_qos,
    add_wait,
    duration,
    field,
    listed,
    one,
    qos,
    resolve_volume,
    size,
)

COLUMNS: list[Column] = [
    ("ID", field("id")), ("Volume", field("volume")), ("Kind", field("kind")),
    ("Status", field("status")), ("Size", size("size_bytes")), ("Copied", size("bytes_copied")),
    ("Took", duration(field("duration_seconds"))), ("Created", field("created_at"))]


class ListRestorePoint(Lister):
    """List restore points, newest first"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("--volume", metavar="<volume>", help="Only this volume's (name "
                                                                 "or id)")
        parser.add_argument("--plan", metavar="<plan>", help="Only this plan's (id)")
        parser.add_argument("--limit", type=int, default=1000, metavar="<count>",
                            help="The newest this many (default 1000)")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return listed(COLUMNS, self.cairn.restore_points.list(
            volume=resolve_volume(self.cairn, parsed_args.volume), plan_id=parsed_args.plan,
            limit=parsed_args.limit))


class _One(ShowOne):
    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("restore_point", metavar="<restore-point>",
                            help="Restore point (id)")
        return parser


class ShowRestorePoint(_One):
    """Show a restore point"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.restore_points.get(parsed_args.restore_point))


class _Job(_One):
    """A command that starts a job: shows the job, followed to its end with --wait."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        add_wait(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.finish(self.start(parsed_args), parsed_args))

    def start(self, parsed_args: argparse.Namespace) -> JSON:
        raise NotImplementedError


class DeleteRestorePoint(_Job):
    """Delete a restore point (a job; locked ones are refused)"""

    def start(self, parsed_args: argparse.Namespace) -> JSON:
        return self.cairn.restore_points.delete(parsed_args.restore_point)


class VerifyRestorePoint(_Job):
    """Re-read a restore point and compare it with its checksums"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--sample", type=float, metavar="<fraction>",
                            help="Read only this fraction of the objects, chosen at random "
                                 "(e.g. 0.05)")
        add_qos(parser, "verify")
        return parser

    def start(self, parsed_args: argparse.Namespace) -> JSON:
        return self.cairn.restore_points.verify(
            parsed_args.restore_point, sample_fraction=parsed_args.sample, qos=qos(parsed_args))


class CopyRestorePoint(_Job):
    """Copy a restore point off site, to an object target"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--target", metavar="<target>",
                            help="Object target (default: the service's)")
        add_qos(parser, "copy")
        return parser

    def start(self, parsed_args: argparse.Namespace) -> JSON:
        return self.cairn.restore_points.copy(parsed_args.restore_point,
                                              target=parsed_args.target, qos=qos(parsed_args))


class RestoreRestorePoint(_Job):
    """Restore a restore point into a new volume, over a volume, or into a new RBD image"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        into = parser.add_mutually_exclusive_group(required=True)
        into.add_argument("--new-volume", metavar="<name>", help="Into a new Cinder volume")
        into.add_argument("--volume", metavar="<volume>",
                          help="In place over this detached volume (name or id)")
        into.add_argument("--image", metavar="<[[cluster/]pool/]image>",
                          help="Into a new RBD image (administrators)")
        parser.add_argument("--size", type=int, metavar="<gib>",
                            help="The new volume's size in GiB (default: the restore point's)")
        parser.add_argument("--type", dest="volume_type", metavar="<volume-type>",
                            help="The new volume's type")
        parser.add_argument("--description", metavar="<text>",
                            help="The new volume's description")
        parser.add_argument("--instant", action="store_true",
                            help="Hand the new volume over within seconds (a clone of the "
                                 "backup), flattened in the background")
        add_qos(parser, "restore")
        return parser

    def start(self, parsed_args: argparse.Namespace) -> JSON:
        if parsed_args.instant and parsed_args.volume:
            raise exceptions.CommandError("--instant needs --new-volume or --image: a "
                                          "restore in place is a copy")
        new: JSON | None = None if parsed_args.new_volume is None else {
            "name": parsed_args.new_volume, "size_gb": parsed_args.size,
            "volume_type": parsed_args.volume_type, "description": parsed_args.description}
        return self.cairn.restore_points.restore(
            parsed_args.restore_point, new_volume=new,
            volume_id=resolve_volume(self.cairn, parsed_args.volume), target=parsed_args.image,
            mode="instant" if parsed_args.instant else "copy", qos=qos(parsed_args))


class LockRestorePoint(_One):
    """Keep a restore point from retention and deletion until a time"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--until", required=True, metavar="<time>",
                            help="ISO 8601 time with zone, e.g. 2027-12-31T00:00:00Z "
                                 "(shortening a lock: administrators only)")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.restore_points.lock(parsed_args.restore_point,
                                                  parsed_args.until))


class UnlockRestorePoint(_One):
    """Remove a restore point's lock (administrators)"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.restore_points.lock(parsed_args.restore_point, None))
