"""`cairn`: volumes, plans, backups, restore points, restores and jobs from the shell.

Credentials come from clouds.yaml (`--os-cloud` / OS_CLOUD) or the OS_* variables, read by
keystoneauth1's loaders; Cairn's endpoint from the Keystone catalog. Every call goes through
`cairnclient` (the REST client an `openstack` plugin shares). Errors print the API's
message and exit 1 (a job that ends failed with `--wait` too); usage errors exit 2.

The command tree: one module per group of resources (`volumes`, `plans`, `restore_points`,
`jobs`, `webhooks`, `files`), each command a few lines that call one method of the client
and print its answer."""

from __future__ import annotations

import sys

import click

from cairnclient.http import ApiError
from cli import jobs, plans, restore_points, volumes, webhooks
from cli.context import State
from cli.output import printable


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--os-cloud", envvar="OS_CLOUD", help="Cloud in clouds.yaml (default OS_CLOUD)")
@click.option("--os-endpoint", help="Cairn's URL, instead of the catalog's (or CAIRN_URL)")
@click.pass_context
def cli(ctx: click.Context, os_cloud: str | None, os_endpoint: str | None) -> None:
    """Cairn: backups of your Cinder volumes."""
    ctx.obj = State(os_cloud, os_endpoint)


for module in (volumes, plans, restore_points, jobs, webhooks):
    for command in module.COMMANDS:
        cli.add_command(command)


def main(args: list[str] | None = None) -> None:
    try:
        cli.main(args=args, prog_name="cairn", standalone_mode=False)
    except ApiError as exc:
        click.echo(f"cairn: {printable(exc.message)}", err=True)
        sys.exit(1)
    except click.exceptions.Abort:
        click.echo("cairn: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
