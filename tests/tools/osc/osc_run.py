"""Runs `openstack ARGS` in Debian's system Python (where python-openstackclient, osc-lib
and cliff are; the project's virtualenv has none of them), with Cairn's plugin as
pyproject.toml declares it, against a stand-in for Cairn's API. Not a test: tests/tools/osc
runs it as `/usr/bin/python3 osc_run.py` with the cases as JSON on stdin.

Each case: `argv` (after `openstack`), `routes` ("METHOD /path" or "/path" -> [status,
body]); each answer: `code`, `out`, `err`, and `sent` (method, path, params, json,
endpoint or endpoint_filter). The plugin is registered as stevedore would find it
installed: the client module through `openstack.cli.extension`, the commands from
`openstack.protection.v1`, read from pyproject.toml (so a wrong entry fails here).

`cairnclient` comes from PYTHONPATH, a directory holding only it: a checkout's root also
holds the `cairn.egg-info` an editable install leaves, whose entry points (perhaps older
than pyproject's) stevedore would load as well."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import requests
from keystoneauth1 import session as ks_session
from openstackclient.common import clientmanager
from openstackclient.shell import OpenStackShell
from osc_lib import clientmanager as osc_clientmanager

REPO = Path(__file__).resolve().parents[3]

ENTRY_POINTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]


def load(spec: str) -> Any:
    module, _, name = spec.partition(":")
    found = importlib.import_module(module)
    return getattr(found, name) if name else found


def plugin() -> Any:
    [(api, spec)] = ENTRY_POINTS["openstack.cli.extension"].items()
    module = load(spec)
    assert api == module.API_NAME
    return module


def register(module: Any) -> None:
    """As osc does at start; again for each case, since osc keeps the client it made in the
    ClientManager's class (each `openstack` is a process of its own)."""
    setattr(clientmanager.ClientManager, module.API_NAME,
            osc_clientmanager.ClientCache(module.make_client))


class StandIn:
    def __init__(self) -> None:
        self.routes: dict[str, list[Any]] = {}
        self.sent: list[dict[str, Any]] = []

    def request(self, url: str, method: str, **kwargs: Any) -> requests.Response:
        path = url.removeprefix("http://cairn.test")
        self.sent.append({"method": method, "path": path,
                          "params": kwargs.get("params") or {}, "json": kwargs.get("json"),
                          "endpoint": url.removesuffix(path) or None,
                          "endpoint_filter": kwargs.get("endpoint_filter")})
        status, body = self.routes.get(f"{method} {path}") or self.routes[path]
        response = requests.Response()
        response.status_code = status
        response.headers["Content-Type"] = "application/json"
        response.raw = io.BytesIO(json.dumps(body).encode())
        return response


def run(module: Any, commands: list[str], stand_in: StandIn,
        case: dict[str, Any]) -> dict[str, Any]:
    stand_in.routes, stand_in.sent = case.get("routes", {}), []
    register(module)
    shell = OpenStackShell()
    for name in commands:
        shell.command_manager.add_command(
            name, load(ENTRY_POINTS["openstack.protection.v1"][name.replace(" ", "_")]))
    out, err = io.StringIO(), io.StringIO()
    shell.stdout, shell.stderr = out, err
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = shell.run(["--os-auth-type", "none", *case["argv"]])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return {"code": code, "out": out.getvalue(), "err": err.getvalue(), "sent": stand_in.sent}


def main() -> None:
    module = plugin()
    clientmanager.PLUGIN_MODULES.append(module)
    commands = [name.replace("_", " ")
                for name in ENTRY_POINTS[f"openstack.{module.API_NAME}.v1"]]
    stand_in = StandIn()
    ks_session.Session.request = (  # type: ignore[method-assign]
        lambda self, url, method, **kw: stand_in.request(url, method, **kw))
    cases = json.load(sys.stdin)
    answers = [run(module, commands, stand_in, case) for case in cases]
    sys.__stdout__.write(json.dumps({"commands": commands, "answers": answers}))


if __name__ == "__main__":
    main()
