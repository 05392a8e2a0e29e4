"""Cairn's REST API over HTTP, through a keystoneauth1 session: the endpoint comes from the
Keystone catalog (service type `volume-backup`) unless one is given. `Http.connect` makes the
session from clouds.yaml or OS_* (`cairn`); `Http.over` takes one already made (an
`openstack` client plugin's, from python-openstackclient's client manager)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import requests
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from keystoneauth1.plugin import BaseAuthPlugin

from cairnclient import config
from cairnclient.config import SERVICE_TYPE

# uwsgi's http-socket (how Debian serves Keystone) closes each connection after the
# response; without this header keystoneauth's pool reuses dead sockets.
_CLOSE = {"Connection": "close"}


def _session(auth: BaseAuthPlugin | None, verify: bool | str = True,
             app_name: str = "cairn-cli") -> ks_session.Session:
    return ks_session.Session(auth=auth, verify=verify, timeout=60.0, app_name=app_name,
                              additional_headers=dict(_CLOSE), connect_retries=2)


class ApiError(Exception):
    """The API (or Keystone) said no; `message` is what it said, `code` the error's code
    in the API's envelope (`path_not_found`) when it gave one."""

    def __init__(self, message: str, status: int | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


@dataclass
class Http:
    session: ks_session.Session
    endpoint: str | None
    endpoint_filter: dict[str, Any]
    headers: dict[str, str]

    @classmethod
    def over(cls, session: ks_session.Session, *, endpoint: str | None = None,
             region_name: str | None = None, interface: str = "public") -> Http:
        """Over a session someone else authenticated; Cairn found in its catalog."""
        filt: dict[str, Any] = {"service_type": SERVICE_TYPE, "interface": interface}
        if region_name:
            filt["region_name"] = region_name
        return cls(session, endpoint, filt, {})

    @classmethod
    def connect(cls, cloud: str | None, endpoint: str | None) -> Http:
        endpoint = endpoint or os.environ.get("CAIRN_URL")
        project = os.environ.get("CAIRN_NOAUTH_PROJECT")
        if project:  # a development Cairn with auth_strategy noauth
            if not endpoint:
                raise ApiError("CAIRN_NOAUTH_PROJECT needs CAIRN_URL (or --os-endpoint)")
            roles = os.environ.get("CAIRN_NOAUTH_ROLES", "member")
            return cls(_session(None), endpoint, {},
                       {"X-Project-Id": project, "X-Roles": roles})
        try:
            cloud_config = config.load(cloud)
        except config.CloudConfigError as exc:
            raise ApiError(str(exc)) from None
        return cls.over(_session(cloud_config.auth, cloud_config.verify), endpoint=endpoint,
                        region_name=cloud_config.region_name, interface=cloud_config.interface)

    def call(self, method: str, path: str, *, json: Any = None,
             params: dict[str, Any] | None = None) -> Any:
        response = self._send(method, path, json=json, params=params)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    @contextmanager
    def stream(self, path: str, *,
               params: dict[str, Any] | None = None) -> Iterator[requests.Response]:
        """A GET whose body is read as it arrives (`iter_content`), never held whole: a
        file or an archive of a restore point can be larger than the memory."""
        response = self._send("GET", path, params=params, stream=True,
                              headers={"Accept": "*/*"})
        try:
            yield response
        finally:
            response.close()

    def _send(self, method: str, path: str, *, json: Any = None,
              params: dict[str, Any] | None = None, stream: bool = False,
              headers: dict[str, str] | None = None) -> requests.Response:
        url = (self.endpoint.rstrip("/") + path) if self.endpoint else path
        kwargs: dict[str, Any] = {"raise_exc": False, "headers": {**self.headers,
                                                                  **(headers or {})}}
        if not self.endpoint:
            kwargs["endpoint_filter"] = self.endpoint_filter
        if json is not None:
            kwargs["json"] = json
        if params:
            kwargs["params"] = {k: v for k, v in params.items() if v is not None}
        if stream:
            kwargs["stream"] = True
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
            try:
                raise ApiError(_message(response), response.status_code, _code(response))
            finally:
                response.close()
        return response


def _message(response: requests.Response) -> str:
    return _said(response) + _retry_after(response)


def _said(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and "message" in error:
        return str(error["message"])
    return f"HTTP {response.status_code}: {body}"


def _code(response: requests.Response) -> str | None:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return None
    return str(error["code"]) if isinstance(error, dict) and "code" in error else None


def _retry_after(response: requests.Response) -> str:
    """When to ask again, for a refusal that passes (429 too many at once, 503 busy): the
    API's Retry-After in seconds, so a script or a person waits as long as it said."""
    if response.status_code not in (429, 503):
        return ""
    seconds = response.headers.get("Retry-After", "")
    return f" (try again in {seconds} s)" if seconds.isdigit() else " (try again later)"
