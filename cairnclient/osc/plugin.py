"""The module python-openstackclient loads through the `openstack.cli.extension` entry point:
the client's name, its versions, and `make_client`, which hands the commands a
`cairnclient.client.Client` over the session osc already authenticated (clouds.yaml or
OS_*, as for every service).

Cairn's URL comes from the Keystone catalog, service type `volume-backup` (what
`cairn-manage keystone register` makes), in osc's region and interface. It is overridden
as for any service: `volume_backup_endpoint_override` in clouds.yaml, or
`--os-volume-backup-endpoint-override URL`.

Nothing here imports osc-lib or cliff: the project's tests call `make_client` directly."""

from __future__ import annotations

import argparse
import os
from typing import Any

from cairnclient.client import Client
from cairnclient.config import SERVICE_TYPE
from cairnclient.http import Http

API_NAME = "protection"
API_VERSION_OPTION = "os_protection_api_version"
DEFAULT_API_VERSION = "1"
API_VERSIONS = {"1": "cairnclient.client.Client"}
ENDPOINT_OVERRIDE = SERVICE_TYPE.replace("-", "_") + "_endpoint_override"
"""The key osc-lib reads an endpoint override of Cairn's service type from."""


def make_client(instance: Any) -> Client:
    """`instance` is osc's ClientManager: its session carries the user's auth."""
    config = instance.get_configuration()
    return Client(Http.over(instance.session, endpoint=config.get(ENDPOINT_OVERRIDE) or None,
                            region_name=instance.region_name,
                            interface=instance.interface or "public"))


def build_option_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument(
        "--os-protection-api-version", metavar="<version>",
        default=os.environ.get("OS_PROTECTION_API_VERSION", DEFAULT_API_VERSION),
        help=f"Cairn API version, default={DEFAULT_API_VERSION} "
             "(Env: OS_PROTECTION_API_VERSION)")
    parser.add_argument(
        "--os-volume-backup-endpoint-override", metavar="<url>",
        default=os.environ.get("OS_VOLUME_BACKUP_ENDPOINT_OVERRIDE"),
        help="Cairn's URL, instead of the catalog's service type volume-backup "
             "(Env: OS_VOLUME_BACKUP_ENDPOINT_OVERRIDE)")
    return parser
