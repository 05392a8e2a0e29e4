"""`cairn-api`: the REST API."""

from __future__ import annotations

import argparse
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from api import errors, idempotency, links, portal
from api.gate import RequestGate
from api.request_metrics import RequestMetrics
from api.routers import (
    backups,
    health,
    jobs,
    metrics,
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
from services.auth.keystone import TokenValidator
from services.auth.policy import Policy
from services.auth.portal_sessions import SessionSeal
from services.clock import Clock, clock_for
from services.db import Database
from services.dispatch import Dispatcher, make_celery
from services.fleet.collector import FleetCollector
from services.limits.leases import Leases
from services.openstack.cinder import gateway_for
from services.openstack.sessions import service_session
from services.scheduler.admission import Admission
from services.settings import Settings, get_settings
from services.storage.ceph import CephClusters
from services.webhooks import sealing


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # What is loaded by now lives as long as the process: keep it out of the collector's
        # full passes. The list benchmark's worst latencies went from 150-220 ms to 50-140 ms.
        gc.collect()
        gc.freeze()
        # Webhooks' secrets are sealed under a key file: without it (or with another key)
        # every delivery would fail later, far from the cause.
        sealing.check_at_start(app.state.db, settings)
        yield
        app.state.clusters.close()
        app.state.leases.close()
        app.state.db.dispose()

    app = FastAPI(
        title="Cairn",
        version="1",
        summary="Backup-as-a-service for OpenStack volumes on Ceph RBD",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.clock = clock_for(settings.clock_file)
    # A connection for every request the process admits at once (`RequestGate`).
    app.state.db = Database(settings.database_url, pool_size=settings.api_threads)
    app.state.leases = Leases.from_settings(settings)
    admission = Admission(app.state.db, app.state.leases,
                          Dispatcher(make_celery(settings.redis_url)), settings)
    app.state.db.on_commit(admission.admit_ids)
    app.state.clusters = CephClusters(settings)
    app.state.policy = Policy.from_file(settings.policy_file)
    app.state.portal_seal = SessionSeal.from_settings(settings)
    app.state.tokens = None
    if settings.auth_strategy == "keystone":
        assert settings.keystone is not None  # the settings validator requires it
        app.state.tokens = TokenValidator(
            service_session(settings.keystone), cache_seconds=settings.token_cache_seconds,
            region=settings.keystone.region_name, interface=settings.keystone.interface,
            admin_projects=frozenset(settings.admin_projects))
    app.state.cinder = gateway_for(settings.keystone, settings.cinder)
    app.state.fleet = fleet_registry(app.state.db, settings, app.state.clock)
    errors.install(app)
    idempotency.install(app)
    links.install(app)
    app.add_middleware(RequestGate, limit=settings.api_threads,
                       per_client=settings.api_client_threads,
                       max_body_bytes=settings.api_max_body_bytes,
                       body_timeout=settings.api_body_timeout_seconds)
    app.add_middleware(RequestMetrics)  # added last: outermost, it sees the door's refusals
    for module in (health, overview, volumes, plans, backups, jobs, restore_points,
                   restore_point_groups, quotas, targets, orphans, webhooks, metrics, session):
        app.include_router(module.router)
    portal.install(app, settings.portal_dir)  # last: its catch-all must not hide a route
    return app


def fleet_registry(db: Database, settings: Settings, clock: Clock) -> CollectorRegistry:
    found = CollectorRegistry()
    found.register(FleetCollector(db, settings, clock))
    return found


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
    # Idle keep-alive connections close after 5 s, and headers are capped at 16 KiB. A
    # client that never finishes its headers holds only a socket; a proxy in front
    # (docs/security.md) times those out.
    uvicorn.run("api.main:create_app", factory=True, host=args.host, port=args.port,
                workers=args.workers, log_level=args.log_level, timeout_keep_alive=5,
                h11_max_incomplete_event_size=16 * 1024,
                limit_concurrency=args.limit_concurrency)
