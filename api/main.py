"""`cairn-api`: the REST API."""

from __future__ import annotations

import argparse
import faulthandler
import gc
import ipaddress
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from api import docs, errors, idempotency, links, portal
from api.callers import Callers
from api.files_proxy import FileService
from api.gate import RequestGate
from api.noauth_peers import LoopbackOnly
from api.request_metrics import RequestMetrics
from api.routers import (
    backups,
    files,
    health,
    jobs,
    orphans,
    overview,
    plans,
    quotas,
    restore_point_groups,
    restore_points,
    session,
    targets,
    volumes,
    webhooks,
)
from api.token_checks import TokenChecks
from services.auth.keystone import TokenValidator
from services.auth.policy import Policy
from services.auth.portal_sessions import SessionSeal, cookie_name
from services.auth.portal_signouts import PortalSignOuts
from services.auth.sign_in_throttle import SignInThrottle
from services.clock import Clock, clock_for
from services.db import Database
from services.dispatch import Dispatcher, make_celery
from services.fleet.collector import FleetCollector
from services.jobs import submit
from services.limits.leases import Leases
from services.metrics import exposition
from services.openstack.cinder_gateway import gateway_for
from services.openstack.sessions import service_session
from services.scheduler.admission import Admission
from services.settings import Settings, get_settings, settings_for
from services.storage.ceph import CephClusters
from services.webhooks import keys

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # What is loaded by now lives as long as the process: keep it out of the collector's
        # full passes. The list benchmark's worst latencies went from 150-220 ms to 50-140 ms.
        build_routes(app)
        # An abort inside librados (a failed assertion, "terminate called ...") leaves
        # every thread's stack in the log, in each uvicorn worker process.
        faulthandler.enable(all_threads=True)
        gc.collect()
        gc.freeze()
        # Webhooks' secrets are sealed under a key file: without the deployment's key (or
        # with another) every delivery would fail later, far from the cause. A database
        # that does not answer yet is not a reason to refuse: the API answers 503 meanwhile,
        # and the key is checked before the first secret is sealed or opened.
        keys.check_at_start(app.state.db, settings, wait=0)
        # In each uvicorn worker process (the first of a host binds the port; in multiprocess
        # mode it serves the others' samples too): never on the REST port, which answers 404.
        exposition.serve("cairn-api", settings.metrics_host, settings.api_metrics_port,
                         app.state.fleet)
        yield
        if checks is not None:
            checks.close()
        app.state.portal_sign_outs.close()
        app.state.sign_in_throttle.close()
        app.state.clusters.close()
        app.state.leases.close()
        app.state.db.dispose()

    app = FastAPI(
        title="Cairn",
        version="1",
        summary="Backup-as-a-service for OpenStack volumes on Ceph RBD",
        lifespan=lifespan,
        # FastAPI's pages load a CDN's scripts on the portal's origin: api/docs.py serves
        # its own.
        docs_url=None, redoc_url=None,
    )
    app.state.settings = settings
    app.state.clock = clock_for(settings.clock_file)
    # A connection for every request the process admits at once (`RequestGate`).
    app.state.db = Database(settings.database_url, pool_size=settings.api_threads)
    app.state.leases = Leases.from_settings(settings)
    admission = Admission(app.state.db, app.state.leases,
                          Dispatcher(make_celery(settings.redis_url)), settings)
    submit.hand_over_after_commit(app.state.db.sessions, admission.admit_ids)
    app.state.clusters = CephClusters(settings)
    app.state.policy = Policy.from_file(settings.policy_file)
    warn_of_cross_project_rules(app.state.policy, settings)
    app.state.portal_seal = SessionSeal.from_settings(settings)
    app.state.portal_cookie = cookie_name(settings.portal_cookie_secure)
    app.state.portal_sign_outs = PortalSignOuts.from_url(settings.redis_url)
    app.state.sign_in_throttle = SignInThrottle.from_settings(settings)
    app.state.tokens = None
    app.state.keystone_lanes = None
    checks = None
    if settings.auth_strategy == "keystone":
        assert settings.keystone is not None  # the settings validator requires it
        app.state.tokens = TokenValidator(
            service_session(settings.keystone), cache_seconds=settings.token_cache_seconds,
            region=settings.keystone.region_name, interface=settings.keystone.interface,
            admin_projects=frozenset(settings.admin_projects))
        checks = TokenChecks(app.state.tokens, threads=settings.api_token_checks,
                             per_client=settings.api_token_checks_per_client,
                             refusals_per_client=settings.api_token_refusals_per_client,
                             timeout=settings.api_token_check_timeout_seconds)
        # The portal session's routes make their Keystone calls in the door's lanes.
        app.state.keystone_lanes = checks.lanes
    callers = Callers(checks=checks, seal=app.state.portal_seal,
                      sign_outs=app.state.portal_sign_outs, cookie=app.state.portal_cookie,
                      trusted_proxies=settings.api_trusted_proxies)
    app.state.cinder = gateway_for(settings.keystone, settings.cinder)
    app.state.files = FileService.from_settings(settings)
    app.state.fleet = fleet_registry(app.state.db, settings, app.state.clock)
    errors.install(app)
    idempotency.install(app)
    links.install(app)
    app.add_middleware(RequestGate, callers=callers, clock=app.state.clock,
                       limit=settings.api_threads,
                       per_client=settings.api_client_threads,
                       max_body_bytes=settings.api_max_body_bytes,
                       body_timeout=settings.api_body_timeout_seconds,
                       send_timeout=settings.api_send_timeout_seconds)
    if settings.auth_strategy == "noauth" and not settings.noauth_allow_remote:
        app.add_middleware(LoopbackOnly)  # however the process was started
    app.add_middleware(RequestMetrics)  # added last: outermost, it sees the door's refusals
    for module in (health, overview, volumes, plans, backups, jobs, restore_points,
                   restore_point_groups, files, quotas, targets, orphans, webhooks,
                   session):
        app.include_router(module.router)
    docs.install(app, settings.portal_dir)
    portal.install(app, settings.portal_dir)  # last: its catch-all must not hide a route
    return app


def build_routes(app: FastAPI) -> None:
    """FastAPI builds a route's dependencies the first time a request is matched against it,
    in the event loop: the first requests after a start stalled every other request of the
    process (a sign-in, matched last, 1.4 s). Every route is matched once here, before the
    first request."""
    for path, methods in app.openapi()["paths"].items():
        for method in methods:
            scope = {"type": "http", "path": path, "method": method.upper(), "root_path": "",
                     "headers": []}
            for route in app.router.routes:
                route.matches(scope)


def warn_of_cross_project_rules(policy: Policy, settings: Settings) -> None:
    """An old policy file (Cinder's `"admin": "role:admin"`) makes the admin of any project
    the cloud's administrator again: say so at every start, naming the rules."""
    rules = policy.cross_project_grants()
    if rules:
        log.warning(
            "policy file %s: %s let a role that any project's users may hold act beyond "
            "their own project (other projects' quotas, the cloud's orphans). Cairn's cloud "
            "administrator is is_admin:True, the admin role in a project CAIRN_ADMIN_PROJECTS "
            "names: write \"admin\": \"is_admin:True\" (the default), not role:admin",
            settings.policy_file, ", ".join(rules))


def fleet_registry(db: Database, settings: Settings, clock: Clock) -> CollectorRegistry:
    found = CollectorRegistry()
    found.register(FleetCollector(db, settings, clock))
    return found


def refuse_open_noauth(settings: Settings, host: str) -> None:
    """noauth believes whoever reaches it: it listens on loopback only, unless the operator
    said otherwise (`noauth_allow_remote`)."""
    if settings.auth_strategy != "noauth" or settings.noauth_allow_remote or _loopback(host):
        return
    raise SystemExit(f"cairn-api: refusing to start: CAIRN_AUTH_STRATEGY=noauth believes "
                     f"whoever reaches it, and --host {host} is not a loopback address. "
                     "Listen on 127.0.0.1, use keystone, or set CAIRN_NOAUTH_ALLOW_REMOTE=true "
                     "on a development machine whose network you trust")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name that may resolve anywhere


def run() -> None:
    parser = argparse.ArgumentParser(prog="cairn-api")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--workers", type=int, default=1,
                        help="uvicorn worker processes (one per core suits the API)")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--limit-concurrency", type=int, default=2048,
                        help="open connections one process accepts; more are answered 503")
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level.upper())
    refuse_open_noauth(settings_for("cairn-api"), args.host)
    # Idle keep-alive connections close after 5 s; a request's headers are bounded in size
    # and in time by the protocol (api/http_protocol.py: uvicorn's httptools has neither).
    # The client's address is the TCP peer's: uvicorn's own X-Forwarded-For handling trusts
    # 127.0.0.1 by default, so any local client could name any address; a proxy in front is
    # trusted only when CAIRN_API_TRUSTED_PROXIES names it (api/peers.py).
    uvicorn.run("api.main:create_app", factory=True, host=args.host, port=args.port,
                workers=args.workers, log_level=args.log_level, timeout_keep_alive=5,
                http="api.http_protocol:ApiHttpProtocol", proxy_headers=False,
                limit_concurrency=args.limit_concurrency)
