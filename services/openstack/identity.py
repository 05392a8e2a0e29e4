"""Keystone's identity API as an administrator uses it: projects, users, roles, and the
service catalog. Every call is idempotent (find, then create), so set-up can run again."""

from __future__ import annotations

from typing import Any

from keystoneauth1 import session as ks_session

IDENTITY = {"service_type": "identity", "interface": "public"}


class IdentityAdmin:
    def __init__(self, session: ks_session.Session, region: str | None = None) -> None:
        self.session = session
        self.region = region

    def _get(self, path: str, **params: str) -> Any:
        return self.session.get(path, endpoint_filter=IDENTITY, params=params).json()

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        return self.session.post(path, endpoint_filter=IDENTITY, json=body).json()

    def _find(self, collection: str, **filters: str) -> dict[str, Any] | None:
        found: list[dict[str, Any]] = self._get(f"/{collection}", **filters)[collection]
        return found[0] if found else None

    def ensure_project(self, name: str, domain_id: str = "default") -> str:
        found = self._find("projects", name=name, domain_id=domain_id)
        if found is not None:
            return str(found["id"])
        body = {"project": {"name": name, "domain_id": domain_id, "enabled": True}}
        return str(self._post("/projects", body)["project"]["id"])

    def ensure_role(self, name: str) -> str:
        found = self._find("roles", name=name)
        if found is not None:
            return str(found["id"])
        return str(self._post("/roles", {"role": {"name": name}})["role"]["id"])

    def ensure_user(self, name: str, password: str, domain_id: str = "default") -> str:
        """The user, with this password (set again when the user exists with another)."""
        found = self._find("users", name=name, domain_id=domain_id)
        if found is None:
            body = {"user": {"name": name, "password": password, "domain_id": domain_id,
                             "enabled": True}}
            return str(self._post("/users", body)["user"]["id"])
        # Setting a password revokes the user's tokens, and Keystone counts a token issued
        # in the same second as revoked too: a set-up run again would break the tokens of
        # services already running, and the next token it takes itself.
        if not self._password_works(str(found["id"]), password):
            self.session.patch(f"/users/{found['id']}", endpoint_filter=IDENTITY,
                               json={"user": {"password": password}})
        return str(found["id"])

    def _password_works(self, user_id: str, password: str) -> bool:
        answer = self.session.post(
            "/auth/tokens", endpoint_filter=IDENTITY, authenticated=False, raise_exc=False,
            json={"auth": {"identity": {"methods": ["password"], "password": {
                "user": {"id": user_id, "password": password}}}}})
        return answer.status_code == 201

    def grant(self, user_id: str, project_id: str, role: str) -> None:
        role_id = self.ensure_role(role)
        self.session.put(f"/projects/{project_id}/users/{user_id}/roles/{role_id}",
                         endpoint_filter=IDENTITY)

    def grant_in_every_project(self, user_id: str, role: str,
                               domain_id: str = "default") -> None:
        """The role on every project of the domain, present and future (an inherited
        assignment on the domain)."""
        role_id = self.ensure_role(role)
        self.session.put(f"/OS-INHERIT/domains/{domain_id}/users/{user_id}/roles/{role_id}"
                         "/inherited_to_projects", endpoint_filter=IDENTITY)

    def ensure_region(self, region: str) -> None:
        found = self.session.get(f"/regions/{region}", endpoint_filter=IDENTITY,
                                 raise_exc=False)
        if found.status_code == 404:
            self._post("/regions", {"region": {"id": region}})

    def ensure_service(self, service_type: str, name: str, description: str) -> str:
        found = self._find("services", type=service_type)
        if found is not None:
            return str(found["id"])
        body = {"service": {"type": service_type, "name": name, "description": description,
                            "enabled": True}}
        return str(self._post("/services", body)["service"]["id"])

    def ensure_endpoints(self, service_id: str, url: str,
                         interfaces: tuple[str, ...] = ("public", "internal", "admin")) -> None:
        """One endpoint per interface at `url`; an existing one with another URL is updated."""
        existing = self._get("/endpoints", service_id=service_id)["endpoints"]
        for interface in interfaces:
            mine = [e for e in existing if e["interface"] == interface
                    and (self.region is None or e.get("region_id") == self.region)]
            if mine:
                if mine[0]["url"] != url:
                    self.session.patch(f"/endpoints/{mine[0]['id']}", endpoint_filter=IDENTITY,
                                       json={"endpoint": {"url": url}})
                continue
            body: dict[str, Any] = {"service_id": service_id, "interface": interface,
                                    "url": url, "enabled": True}
            if self.region is not None:
                body["region_id"] = self.region
            self._post("/endpoints", {"endpoint": body})
