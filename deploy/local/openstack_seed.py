"""Set-up of the local Keystone for the stack: Cinder's and Cairn's service users, their
catalog entries, a demo project, and Cinder's readiness check. Idempotent.

    openstack_seed.py cinder --password P --endpoint URL
    openstack_seed.py cinder-ready           (exit 0 once the scheduler knows a pool)
    openstack_seed.py cairn --password P --endpoint URL
    openstack_seed.py cinder-backup --password P   (Cairn's Cinder backup driver's user)
    openstack_seed.py demo --clouds-yaml PATH
    openstack_seed.py admin-project-id       (prints the id of the project `admin`)
"""

from __future__ import annotations

import argparse
import os
import sys

import yaml

from services.openstack.identity import IdentityAdmin
from services.openstack.sessions import make_session, password_auth

KEYSTONE = f"http://127.0.0.1:{os.environ.get('CAIRN_KEYSTONE_PORT', '31000')}/v3"
ADMIN_PASSWORD = os.environ.get("CAIRN_OS_ADMIN_PASSWORD", "cairn-admin")


def admin() -> IdentityAdmin:
    return IdentityAdmin(make_session(password_auth(KEYSTONE, "admin", ADMIN_PASSWORD, "admin")),
                         region="RegionOne")


def service_user(ident: IdentityAdmin, name: str, password: str) -> str:
    project = ident.ensure_project("service")
    user = ident.ensure_user(name, password)
    for role in ("admin", "service"):
        ident.grant(user, project, role)
    return user


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("cinder", "cairn"):
        p = sub.add_parser(name)
        p.add_argument("--password", required=True)
        p.add_argument("--endpoint")
    backup = sub.add_parser("cinder-backup")
    backup.add_argument("--password", required=True)
    sub.add_parser("cinder-ready")
    sub.add_parser("admin-project-id")
    demo = sub.add_parser("demo")
    demo.add_argument("--clouds-yaml", required=True)
    args = parser.parse_args()
    ident = admin()
    if args.cmd == "cinder":
        service_user(ident, "cinder", args.password)
        service = ident.ensure_service("volumev3", "cinderv3", "Cinder block storage")
        ident.ensure_endpoints(service, args.endpoint)
    elif args.cmd == "cairn":
        user = service_user(ident, "cairn", args.password)
        # Instant restores: Cinder adopts the clone in the tenant's project for Cairn, with
        # a token of Cairn's scoped there (Cinder's volume_manage is an administrator's
        # call); docs/operations.md shows a narrower role with a Cinder policy rule.
        ident.grant_in_every_project(user, "admin")
    elif args.cmd == "cinder-backup":
        # Cairn's Cinder backup driver acts for every project's backups: the cloud's
        # administrator in Cairn's eyes, the admin role in project `admin`
        # (CAIRN_ADMIN_PROJECTS), and nothing in Cinder.
        user = ident.ensure_user("cinder-backup", args.password)
        ident.grant(user, ident.ensure_project("admin"), "admin")
    elif args.cmd == "cinder-ready":
        pools = ident.session.get("/scheduler-stats/get_pools",
                                  endpoint_filter={"service_type": "volumev3",
                                                   "interface": "public"}).json()["pools"]
        return 0 if pools else 1
    elif args.cmd == "admin-project-id":
        # Keystone's bootstrap made it; CAIRN_ADMIN_PROJECTS names it by id (a name is
        # unique only within its domain).
        print(ident.ensure_project("admin"))
    elif args.cmd == "demo":
        project = ident.ensure_project("demo")
        user = ident.ensure_user("demo", "demo-password")
        ident.grant(user, project, "member")
        clouds = {"clouds": {"cairn-demo": {
            "auth": {"auth_url": KEYSTONE, "username": "demo", "password": "demo-password",
                     "project_name": "demo", "user_domain_name": "Default",
                     "project_domain_name": "Default"},
            "region_name": "RegionOne", "interface": "public", "identity_api_version": 3}}}
        with open(args.clouds_yaml, "w") as out:
            yaml.safe_dump(clouds, out, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
