"""`openstack protection job …`: what ran, runs and waits; a queued or running job's QoS
changed (a running copy follows within a second), or the job cancelled."""

from __future__ import annotations

import argparse
from typing import Any

from osc_lib import exceptions

from cairnclient.osc.common import (
    JOB_COLUMNS,
    Lister,
    ShowOne,
    add_qos,
    add_wait,
    listed,
    one,
    qos,
    resolve_volume,
)

KINDS = ["backup", "restore", "delete", "verify", "prune", "copy"]
STATUSES = ["queued", "running", "succeeded", "failed", "cancelled", "skipped"]


class ListJob(Lister):
    """List jobs, newest first"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("--plan", metavar="<plan>", help="Only this plan's (id)")
        parser.add_argument("--volume", metavar="<volume>", help="Only this volume's (name "
                                                                 "or id)")
        parser.add_argument("--kind", choices=KINDS)
        parser.add_argument("--status", choices=STATUSES)
        parser.add_argument("--since", metavar="<time>", help="Created at or after (ISO 8601 "
                                                              "with zone)")
        parser.add_argument("--until", metavar="<time>", help="Created before (ISO 8601 "
                                                              "with zone)")
        parser.add_argument("--limit", type=int, default=50, metavar="<count>",
                            help="The newest this many (default 50)")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return listed(JOB_COLUMNS, self.cairn.jobs.list(
            plan_id=parsed_args.plan, volume=resolve_volume(self.cairn, parsed_args.volume),
            kind=parsed_args.kind, status=parsed_args.status, since=parsed_args.since,
            until=parsed_args.until, limit=parsed_args.limit))


class _OneJob(ShowOne):
    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("job", metavar="<job>", help="Job (id)")
        return parser


class ShowJob(_OneJob):
    """Show a job (--wait: once it ended)"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        add_wait(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.finish(self.cairn.jobs.get(parsed_args.job), parsed_args))


class SetJob(_OneJob):
    """Change a queued or running job's limits ('none' removes one)"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        add_qos(parser, "job")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        change = qos(parsed_args)
        if not change:
            raise exceptions.CommandError("give --qos-bytes-per-second and/or "
                                          "--qos-ops-per-second")
        return one(self.cairn.jobs.update_qos(parsed_args.job, change))


class CancelJob(_OneJob):
    """Cancel a queued or running job"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.jobs.cancel(parsed_args.job))
