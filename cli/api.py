"""Cairn's REST API for the CLI, through a keystoneauth1 session: the endpoint comes from
the Keystone catalog (service type `volume-backup`) unless one is given."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import requests
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from keystoneauth1.plugin import BaseAuthPlugin

from cli import cloud_config
from cli.cloud_config import SERVICE_TYPE

# uwsgi's http-socket (how Debian serves Keystone) closes each connection after the
# response; without this header keystoneauth's pool reuses dead sockets.
_CLOSE = {"Connection": "close"}


def _session(auth: BaseAuthPlugin | None, verify: bool | str = True) -> ks_session.Session:
    return ks_session.Session(auth=auth, verify=verify, timeout=60.0, app_name="cairn-cli",
                              additional_headers=dict(_CLOSE), connect_retries=2)


class ApiError(Exception):
    """The API (or Keystone) said no; `message` is what it said."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass
class Api:
    session: ks_session.Session
    endpoint: str | None
    endpoint_filter: dict[str, Any]
    headers: dict[str, str]

    @classmethod
    def connect(cls, cloud: str | None, endpoint: str | None) -> Api:
        endpoint = endpoint or os.environ.get("CAIRN_URL")
        project = os.environ.get("CAIRN_NOAUTH_PROJECT")
        if project:  # a development Cairn with auth_strategy noauth
            if not endpoint:
                raise ApiError("CAIRN_NOAUTH_PROJECT needs CAIRN_URL (or --os-endpoint)")
            roles = os.environ.get("CAIRN_NOAUTH_ROLES", "member")
            return cls(_session(None), endpoint, {},
                       {"X-Project-Id": project, "X-Roles": roles})
        try:
            config = cloud_config.load(cloud)
        except cloud_config.CloudConfigError as exc:
            raise ApiError(str(exc)) from None
        filt: dict[str, Any] = {"service_type": SERVICE_TYPE, "interface": config.interface}
        if config.region_name:
            filt["region_name"] = config.region_name
        return cls(_session(config.auth, config.verify), endpoint, filt, {})

    def call(self, method: str, path: str, *, json: Any = None,
             params: dict[str, Any] | None = None) -> Any:
        url = (self.endpoint.rstrip("/") + path) if self.endpoint else path
        kwargs: dict[str, Any] = {"raise_exc": False, "headers": self.headers}
        if not self.endpoint:
            kwargs["endpoint_filter"] = self.endpoint_filter
        if json is not None:
            kwargs["json"] = json
        if params:
            kwargs["params"] = {k: v for k, v in params.items() if v is not None}
        try:
            response: requests.Response = self.session.request(url, method, **kwargs)
        except ks_exc.EndpointNotFound:
            raise ApiError(f"no {SERVICE_TYPE} endpoint in the Keystone catalog; register "
                           "Cairn (cairn-manage keystone register) or pass --os-endpoint"
                           ) from None
        except ks_exc.Unauthorized as exc:
            raise ApiError(f"Keystone refused the credentials: {exc}", 401) from None
        except ks_exc.ClientException as exc:
            raise ApiError(f"cannot reach Cairn: {exc}") from None
        except Exception as exc:  # keystoneauth raises plain Exception for bad options
            raise ApiError(str(exc)) from None
        if response.status_code >= 400:
            raise ApiError(_message(response), response.status_code)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()


def _message(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and "message" in error:
        return str(error["message"])
    return f"HTTP {response.status_code}: {body}"
