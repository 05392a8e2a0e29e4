"""Whose Cinder a call is made as. Calls made for a user carry the user's own token, so
Cinder itself decides what the user may see and create (another project's volume is simply
not found); calls the workers make later, when the user's token may have expired, use
Cairn's service credentials (an admin role in Cinder), in Cairn's project or, where Cinder
must see a tenant's project (an instant restore's adoption), in that one."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import token_endpoint

from services.context import RequestContext
from services.errors import Conflict, InvalidInput, ServiceUnavailable
from services.openstack.call_budget import CallBudget
from services.openstack.cinder import VOLUME_SERVICE_TYPES, CinderApi
from services.openstack.sessions import make_session, service_session
from services.settings import CinderSettings, KeystoneSettings
from services.storage.refs import ImageRef

log = logging.getLogger(__name__)


@dataclass
class _ServiceApi:
    api: CinderApi | None = None


class CinderGateway:
    """Cinder for the API and the workers, and where Cinder's RBD driver keeps a volume."""

    def __init__(self, keystone: KeystoneSettings, cinder: CinderSettings,
                 budget: CallBudget | None = None,
                 shared: _ServiceApi | None = None) -> None:
        self.keystone = keystone
        self.settings = cinder
        self.budget = budget
        """Set on a request's gateway (`for_request`): the calls made for its caller."""
        self._service = shared or _ServiceApi()
        """Cairn's service user's session, one for the process (every request's gateway
        shares it)."""
        self._in_projects: dict[str, CinderApi] = {}

    def for_request(self) -> CinderGateway:
        """This gateway for one API request: what it asks for the caller counts against one
        budget of `settings.calls_per_request` calls."""
        return CinderGateway(self.keystone, self.settings,
                             CallBudget(self.settings.calls_per_request,
                                        self.settings.seconds_per_request), self._service)

    def image_ref(self, volume_id: str) -> ImageRef:
        # cinder.volume.drivers.rbd names each volume's image volume-<id>.
        return ImageRef(self.settings.cluster, self.settings.pool, f"volume-{volume_id}")

    def for_user(self, ctx: RequestContext) -> CinderApi:
        if ctx.token is None:
            raise InvalidInput("Cinder volumes need auth_strategy keystone: Cairn calls Cinder "
                               "with the caller's token")
        endpoint = next((ctx.endpoints[t] for t in VOLUME_SERVICE_TYPES if t in ctx.endpoints),
                        None)
        if endpoint is None:
            raise ServiceUnavailable("your token's catalog has no block-storage (Cinder) "
                                     "endpoint")
        session = make_session(token_endpoint.Token(endpoint, ctx.token))
        return CinderApi(session, {"service_type": "volumev3"}, self.budget)

    def as_service(self) -> CinderApi:
        """Cairn's service user (an administrator in Cinder); on a request's gateway, its
        calls count against the request's budget."""
        if self._service.api is None:
            self._service.api = CinderApi(service_session(self.keystone),
                                          self._endpoint_filter())
        return self._service.api.within(self.budget)

    def as_service_in(self, project_id: str) -> CinderApi:
        """Cairn's service user acting in a tenant's project: needs a role there that
        Cinder's policy lets adopt images (docs/operations.md, instant restores). Raises
        Conflict at once when Keystone gives it no token for the project. Within one
        request's gateway, one token per project."""
        if project_id in self._in_projects:
            return self._in_projects[project_id]
        session = service_session(self.keystone, project_id=project_id)
        try:
            session.get_token()
        except ks_exc.Unauthorized:
            raise Conflict(
                f"Cairn's service user has no role in project {project_id}, which it needs "
                "to make a Cinder volume there (an instant restore's, which Cinder adopts "
                "for Cairn; or a cloud administrator's restore of the project's restore "
                "point). Ask the operator to grant it (docs/openstack.md, instant restores), "
                "or, for an instant restore, use a normal restore (mode copy)") from None
        except ks_exc.ClientException:
            log.warning("Keystone could not be reached for project %s", project_id,
                        exc_info=True)
            raise ServiceUnavailable("Keystone could not be reached; try again in a few "
                                     "seconds") from None
        api = CinderApi(session, self._endpoint_filter(), self.budget)
        if self.budget is not None:  # a worker's gateway lives long: it asks again each time
            self._in_projects[project_id] = api
        return api

    def adoption_host(self) -> str:
        """The `host@backend#pool` that adopts images of `settings.pool`."""
        if self.settings.manage_host is not None:
            return self.settings.manage_host
        hosts = self.as_service().backend_hosts()
        if len(hosts) != 1:
            raise Conflict(
                f"Cinder has {len(hosts)} backend pools; an instant restore cannot tell which "
                "adopts the clone. The operator sets cinder.manage_host; use a normal "
                "restore (mode copy) meanwhile")
        return hosts[0]

    def _endpoint_filter(self) -> dict[str, Any]:
        filt: dict[str, Any] = {"service_type": "volumev3", "interface": self.keystone.interface}
        if self.keystone.region_name is not None:
            filt["region_name"] = self.keystone.region_name
        return filt


def gateway_for(keystone: KeystoneSettings | None,
                cinder: CinderSettings | None) -> CinderGateway | None:
    if keystone is None or cinder is None:
        return None
    return CinderGateway(keystone, cinder)
