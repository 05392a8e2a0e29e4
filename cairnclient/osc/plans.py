"""`openstack protection plan …`: backup plans (volumes, schedule rules, window, retention,
verify, QoS, off-site copies), paused, resumed and run now.

`plan create` and `plan set` take the same options; `set` sends only what was given (a
retention or verify option changes that one number and keeps the plan's others), as
`openstack volume set` does."""

from __future__ import annotations

import argparse
from typing import Any

from osc_lib import exceptions

from cairnclient.client import JSON, PlanFields
from cairnclient.osc.common import (
    JOB_COLUMNS,
    Command,
    Lister,
    ShowOne,
    add_qos,
    add_wait,
    field,
    given,
    listed,
    one,
)

COLUMNS = [("ID", field("id")), ("Name", field("name")), ("Status", field("status")),
           ("Volumes", lambda p: len(p.get("volumes") or [])),
           ("Next run", field("next_run_at"))]

KEEP = {"keep_last": "keep_last", "keep_daily": "daily", "keep_weekly": "weekly",
        "keep_monthly": "monthly", "keep_yearly": "yearly"}
"""--keep-* option (its dest) -> the retention field."""
VERIFY = {"verify_full_every_days": "full_every_days",
          "verify_sampled_every_days": "sampled_every_days",
          "verify_sample_fraction": "sample_fraction"}


def _add_settings(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--incremental", dest="incrementals", action="append", default=[],
                        metavar="<cron>", help="Cron rule for incremental backups, e.g. "
                                               "'0 2 * * *' (repeat for several)")
    parser.add_argument("--full", dest="fulls", action="append", default=[], metavar="<cron>",
                        help="Cron rule for full backups, e.g. '0 3 * * 0' (repeat)")
    parser.add_argument("--timezone", metavar="<zone>", help="IANA timezone of the rules")
    parser.add_argument("--window", metavar="<HH:MM-HH:MM>",
                        help="Backup window, e.g. 22:00-06:00 ('none': no window)")
    for dest, name in KEEP.items():
        parser.add_argument("--" + dest.replace("_", "-"), dest=dest, type=int,
                            metavar="<count>", help=f"Retention: {name.replace('_', ' ')}")
    parser.add_argument("--description", metavar="<text>")
    parser.add_argument("--target", metavar="<target>",
                        help="Backup target (default: the service's; `protection target "
                             "list`)")
    parser.add_argument("--consistency", choices=["volume", "group"],
                        help="group: one crash-consistent RBD group snapshot over all the "
                             "volumes per run")
    add_qos(parser, "each backup")
    parser.add_argument("--verify-full-every-days", type=float, metavar="<days>",
                        help="Verify every object of the newest restore point this often")
    parser.add_argument("--verify-sampled-every-days", type=float, metavar="<days>",
                        help="A sampled verify this often")
    parser.add_argument("--verify-sample-fraction", type=float, metavar="<fraction>",
                        help="Share of the objects a sampled verify reads")
    parser.add_argument("--offsite", metavar="<target>",
                        help="Copy restore points off site to this object target")
    parser.add_argument("--offsite-every", choices=["backup", "day", "week", "month"],
                        help="Copy the first restore point of each period, or every one")


def _window(text: str) -> JSON | None:
    if text.lower() == "none":
        return None
    start, sep, end = text.partition("-")
    if not sep:
        raise exceptions.CommandError("--window is HH:MM-HH:MM, e.g. 22:00-06:00 (or 'none')")
    return {"start": start, "end": end}


def _fields(args: argparse.Namespace, current: JSON | None) -> dict[str, Any]:
    """The plan fields the options give; `current` (the plan being changed) fills in the
    retention, verify and off-site numbers not given."""
    out: dict[str, Any] = {}
    rules = ([{"cron": c, "kind": "incremental"} for c in args.incrementals]
             + [{"cron": c, "kind": "full"} for c in args.fulls])
    if rules:
        out["rules"] = rules
    for name in ("timezone", "description", "target", "consistency"):
        if getattr(args, name) is not None:
            out[name] = getattr(args, name)
    if args.window is not None:
        out["window"] = _window(args.window)
    for name in ("qos_bytes_per_second", "qos_ops_per_second"):
        if getattr(args, name) is not None:
            out[name] = given(getattr(args, name))
    keep = {KEEP[k]: getattr(args, k) for k in KEEP if getattr(args, k) is not None}
    if keep or current is None:
        out["retention"] = {**((current or {}).get("retention") or {}), **keep}
    verify = {VERIFY[k]: getattr(args, k) for k in VERIFY if getattr(args, k) is not None}
    if verify:
        out["verify"] = {**((current or {}).get("verify") or {}), **verify}
    offsite = (current or {}).get("offsite") or {}
    if args.offsite or (args.offsite_every and offsite):
        out["offsite"] = {"target": args.offsite or offsite["target"],
                          "every": args.offsite_every or offsite.get("every") or "week",
                          "retention": offsite.get("retention")}
    elif args.offsite_every:
        raise exceptions.CommandError("--offsite-every needs --offsite <target> (the plan "
                                      "copies nothing off site yet)")
    return out


class ListPlan(Lister):
    """List backup plans"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return listed(COLUMNS, self.cairn.plans.list())


class _OnePlan(ShowOne):
    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("plan", metavar="<plan>", help="Plan (id)")
        return parser


class ShowPlan(_OnePlan):
    """Show a backup plan"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.plans.get(parsed_args.plan))


class CreatePlan(ShowOne):
    """Create a backup plan"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="<name>", help="New plan's name")
        parser.add_argument("--volume", dest="volumes", action="append", default=[],
                            metavar="<volume>", help="Volume to protect (name or id; repeat "
                                                     "for several)")
        parser.add_argument("--cinder-group", metavar="<group-id>",
                            help="Instead of --volume: the volumes of this Cinder group, "
                                 "followed as volumes join or leave it")
        parser.add_argument("--paused", action="store_true",
                            help="Create it paused (`protection plan resume` starts it)")
        _add_settings(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        fields = _fields(parsed_args, None)
        if "rules" not in fields:
            raise exceptions.CommandError("give at least one --incremental or --full cron "
                                          "rule")
        if bool(parsed_args.volumes) == bool(parsed_args.cinder_group):
            raise exceptions.CommandError("give the volumes (--volume, repeatable) or one "
                                          "--cinder-group")
        fields["name"] = parsed_args.name
        if parsed_args.cinder_group:
            fields["cinder_group"] = parsed_args.cinder_group
        else:
            fields["volumes"] = [self.cairn.volumes.resolve(v) for v in parsed_args.volumes]
        if parsed_args.paused:
            fields["enabled"] = False
        created: PlanFields = fields  # type: ignore[assignment]
        return one(self.cairn.plans.create(created))


class SetPlan(_OnePlan):
    """Change a backup plan: only what is given (new rules replace the plan's)"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--name", metavar="<name>")
        parser.add_argument("--volume", dest="volumes", action="append", default=[],
                            metavar="<volume>", help="Replace the plan's volumes (name or "
                                                     "id; repeat)")
        parser.add_argument("--no-offsite", action="store_true", help="Stop off-site copies")
        _add_settings(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        if parsed_args.no_offsite and parsed_args.offsite:
            raise exceptions.CommandError("give --offsite or --no-offsite, not both")
        fields = _fields(parsed_args, self.cairn.plans.get(parsed_args.plan))
        if parsed_args.name is not None:
            fields["name"] = parsed_args.name
        if parsed_args.volumes:
            fields["volumes"] = [self.cairn.volumes.resolve(v) for v in parsed_args.volumes]
        if parsed_args.no_offsite:
            fields["offsite"] = None
        if not fields:
            raise exceptions.CommandError("nothing to change: give what to change (see "
                                          "--help)")
        changes: PlanFields = fields  # type: ignore[assignment]
        return one(self.cairn.plans.update(parsed_args.plan, changes))


class DeletePlan(Command):
    """Delete backup plans (their restore points stay)"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("plans", metavar="<plan>", nargs="+", help="Plan(s) to delete (id)")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> None:
        for plan in parsed_args.plans:
            self.cairn.plans.delete(plan)


class PausePlan(_OnePlan):
    """Pause a backup plan: no new jobs until it is resumed"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.plans.pause(parsed_args.plan))


class ResumePlan(_OnePlan):
    """Resume a backup plan's schedule from its next slot"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.plans.resume(parsed_args.plan))


class RunPlan(Lister):
    """Back up every volume of a plan now"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("plan", metavar="<plan>", help="Plan (id)")
        parser.add_argument("--full", action="store_true",
                            help="Full backups instead of the plan's next kind")
        add_wait(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        result = self.cairn.plans.run(parsed_args.plan,
                                      kind="full" if parsed_args.full else None)
        jobs = [self.finish(job, parsed_args) for job in result["jobs"]]
        return listed(JOB_COLUMNS, jobs)
