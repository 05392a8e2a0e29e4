"""Credentials as OpenStack tools read them: a cloud from clouds.yaml (`--os-cloud` or
OS_CLOUD), else the OS_* environment variables; turned into a keystoneauth1 plugin with
keystoneauth1's own loaders, so every auth type keystoneauth knows works (password, token,
v3applicationcredential, ...)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading
from keystoneauth1.plugin import BaseAuthPlugin

CLOUDS_YAML_PATHS = (Path("clouds.yaml"), Path("~/.config/openstack/clouds.yaml").expanduser(),
                     Path("/etc/openstack/clouds.yaml"))

SERVICE_TYPE = "volume-backup"
"""Cairn's service type in the Keystone catalog (`cairn-manage keystone register` adds it).
`backup` is Freezer's and `data-protection` Karbor's in the service-types authority, so a
cloud can run Cairn beside either."""

# OS_* variables that are not auth plugin options.
_NOT_AUTH = {"OS_CLOUD", "OS_REGION_NAME", "OS_INTERFACE", "OS_CACERT", "OS_AUTH_TYPE",
             "OS_IDENTITY_API_VERSION", "OS_CLIENT_CONFIG_FILE", "OS_INSECURE"}


class CloudConfigError(ValueError):
    """The credentials cannot be read; the message says what to fix."""


@dataclass(frozen=True)
class CloudConfig:
    auth: BaseAuthPlugin
    region_name: str | None
    interface: str
    verify: bool | str


def load(cloud: str | None = None, env: Mapping[str, str] | None = None) -> CloudConfig:
    env = os.environ if env is None else env
    cloud = cloud or env.get("OS_CLOUD")
    if cloud:
        entry = _clouds_yaml_entry(cloud, env)
        auth = dict(entry.get("auth") or {})
        if "password" not in auth and env.get("OS_PASSWORD"):
            auth["password"] = env["OS_PASSWORD"]  # clouds.yaml often leaves it out
        auth_type = str(entry.get("auth_type") or "password")
        region = entry.get("region_name")
        interface = str(entry.get("interface") or "public")
        verify: bool | str = entry.get("cacert") or not entry.get("insecure", False)
        where = f"cloud {cloud!r} in clouds.yaml"
    else:
        auth = {key[3:].lower(): value for key, value in env.items()
                if key.startswith("OS_") and key not in _NOT_AUTH and value}
        if not auth:
            raise CloudConfigError("no OpenStack credentials: set OS_CLOUD (a cloud in "
                                   "clouds.yaml) or the OS_* variables (OS_AUTH_URL, ...)")
        auth_type = env.get("OS_AUTH_TYPE") or ("token" if "token" in auth else "password")
        region = env.get("OS_REGION_NAME")
        interface = env.get("OS_INTERFACE", "public")
        verify = env.get("OS_CACERT") or env.get("OS_INSECURE", "").lower() not in ("1", "true")
        where = "the OS_* variables"
    return CloudConfig(_plugin(auth_type, auth, where), region, interface, verify)


def _clouds_yaml_entry(cloud: str, env: Mapping[str, str]) -> dict[str, Any]:
    paths = ([Path(env["OS_CLIENT_CONFIG_FILE"])] if env.get("OS_CLIENT_CONFIG_FILE")
             else list(CLOUDS_YAML_PATHS))
    for path in paths:
        if not path.is_file():
            continue
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise CloudConfigError(f"{path} is not valid YAML: {exc}") from None
        clouds = data.get("clouds") or {}
        if cloud in clouds:
            entry: dict[str, Any] = clouds[cloud] or {}
            return entry
    raise CloudConfigError(f"cloud {cloud!r} is not in any clouds.yaml "
                       f"(looked in {', '.join(str(p) for p in paths)})")


def _plugin(auth_type: str, options: dict[str, Any], where: str) -> BaseAuthPlugin:
    try:
        loader: loading.BaseLoader[BaseAuthPlugin] = loading.get_plugin_loader(auth_type)
    except ks_exc.NoMatchingPlugin:
        raise CloudConfigError(f"unknown auth type {auth_type!r} in {where}") from None
    known = {o.dest for o in loader.get_options()}
    try:
        plugin: BaseAuthPlugin = loader.load_from_options(
            **{k: v for k, v in options.items() if k in known})
    except ks_exc.MissingRequiredOptions as exc:
        missing = ", ".join(o.dest for o in exc.options)
        raise CloudConfigError(f"{where}: missing {missing} for auth type {auth_type}") from None
    return plugin
