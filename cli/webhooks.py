"""`cairn webhook`: hear about backups, restores and plans as signed CloudEvents."""

from __future__ import annotations

import click

from cli.context import State, pass_state
from cli.output import FORMAT, Column, emit, field, show

WEBHOOK_COLUMNS: list[Column] = [
    ("ID", field("id")), ("URL", lambda w: w.get("url") or w.get("url_host")),
    ("Events", lambda w: ", ".join(w["event_types"]) or "all"),
    ("Enabled", field("enabled")), ("Disabled because", field("disabled_reason")),
]


@click.group()
def webhook() -> None:
    """Webhooks: hear about backups, restores and plans as signed CloudEvents."""


@webhook.command("create")
@click.argument("url")
@click.option("--event", "events", multiple=True,
              help="Event type, e.g. backup.create.error (repeat; default: every event)")
@click.option("--description")
@FORMAT
@pass_state
def webhook_create(state: State, url: str, events: tuple[str, ...], description: str | None,
                   fmt: str) -> None:
    """Create a webhook; prints its signing secret, which is not shown again."""
    show(state.client.webhooks.create(url, event_types=list(events),
                                      description=description), fmt)


@webhook.command("list")
@FORMAT
@pass_state
def webhook_list(state: State, fmt: str) -> None:
    found = state.client.webhooks.list()
    emit({"webhooks": found}, fmt, found, WEBHOOK_COLUMNS)


@webhook.command("show")
@click.argument("webhook_id")
@FORMAT
@pass_state
def webhook_show(state: State, webhook_id: str, fmt: str) -> None:
    show(state.client.webhooks.get(webhook_id), fmt)


@webhook.command("set")
@click.argument("webhook_id")
@click.option("--url")
@click.option("--event", "events", multiple=True, help="Replace the event types (repeat)")
@click.option("--description")
@click.option("--enable/--disable", default=None,
              help="Enable again (forgets past failures) or disable")
@FORMAT
@pass_state
def webhook_set(state: State, webhook_id: str, url: str | None, events: tuple[str, ...],
                description: str | None, enable: bool | None, fmt: str) -> None:
    show(state.client.webhooks.update(
        webhook_id, url=url, event_types=list(events) if events else None, enabled=enable,
        description=description), fmt)


@webhook.command("delete")
@click.argument("webhook_id")
@pass_state
def webhook_delete(state: State, webhook_id: str) -> None:
    state.client.webhooks.delete(webhook_id)
    click.echo(f"webhook {webhook_id} deleted")


@webhook.command("rotate-secret")
@click.argument("webhook_id")
@FORMAT
@pass_state
def webhook_rotate(state: State, webhook_id: str, fmt: str) -> None:
    """A new secret; the old one keeps signing until `previous_expires_at`."""
    show(state.client.webhooks.rotate_secret(webhook_id), fmt)


@webhook.command("test")
@click.argument("webhook_id")
@FORMAT
@pass_state
def webhook_test(state: State, webhook_id: str, fmt: str) -> None:
    """Send a `webhook.test` event; see it arrive in `cairn webhook deliveries`."""
    show(state.client.webhooks.test(webhook_id), fmt)


@webhook.command("deliveries")
@click.argument("webhook_id")
@click.option("--limit", type=int, default=20, show_default=True)
@FORMAT
@pass_state
def webhook_deliveries(state: State, webhook_id: str, limit: int, fmt: str) -> None:
    data = state.client.webhooks.deliveries(webhook_id, limit=limit)
    emit(data, fmt, data["deliveries"], [
        ("ID", field("id")), ("Event", field("event_type")), ("Status", field("status")),
        ("Attempts", field("attempts")), ("Answer", field("last_status_code")),
        ("Error", field("last_error")), ("Created", field("created_at"))])


COMMANDS = [webhook]
