"""`openstack protection webhook …`: hear about backups, restores and plans as signed
CloudEvents."""

from __future__ import annotations

import argparse
from typing import Any

from cairnclient.osc.common import Column, Command, Lister, ShowOne, field, listed, one

COLUMNS: list[Column] = [
    ("ID", field("id")), ("URL", lambda w: w.get("url") or w.get("url_host")),
    ("Events", lambda w: ", ".join(w.get("event_types") or []) or "all"),
    ("Enabled", field("enabled")), ("Disabled because", field("disabled_reason"))]


class ListWebhook(Lister):
    """List webhooks"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return listed(COLUMNS, self.cairn.webhooks.list())


class _OneWebhook(ShowOne):
    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("webhook", metavar="<webhook>", help="Webhook (id)")
        return parser


class ShowWebhook(_OneWebhook):
    """Show a webhook"""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.webhooks.get(parsed_args.webhook))


class CreateWebhook(ShowOne):
    """Create a webhook (its signing secret is shown this once)"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("url", metavar="<url>", help="Where the events are POSTed")
        parser.add_argument("--event", dest="events", action="append", default=[],
                            metavar="<event-type>",
                            help="e.g. backup.create.error (repeat; default: every event)")
        parser.add_argument("--description", metavar="<text>")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.webhooks.create(parsed_args.url, event_types=parsed_args.events,
                                              description=parsed_args.description))


class SetWebhook(_OneWebhook):
    """Change a webhook: only what is given"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--url", metavar="<url>")
        parser.add_argument("--event", dest="events", action="append", default=[],
                            metavar="<event-type>", help="Replace the event types (repeat)")
        parser.add_argument("--description", metavar="<text>")
        enabled = parser.add_mutually_exclusive_group()
        enabled.add_argument("--enable", dest="enabled", action="store_true", default=None,
                             help="Enable again (forgets past failures)")
        enabled.add_argument("--disable", dest="enabled", action="store_false")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return one(self.cairn.webhooks.update(
            parsed_args.webhook, url=parsed_args.url, event_types=parsed_args.events or None,
            enabled=parsed_args.enabled, description=parsed_args.description))


class DeleteWebhook(Command):
    """Delete webhooks"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)
        parser.add_argument("webhooks", metavar="<webhook>", nargs="+",
                            help="Webhook(s) to delete (id)")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> None:
        for webhook in parsed_args.webhooks:
            self.cairn.webhooks.delete(webhook)
