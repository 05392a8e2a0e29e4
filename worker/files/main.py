"""`cairn-files`: the file service (worker/files/app.py) on `CAIRN_FILES_BIND`, one
process with uvicorn's one event loop; the reads run on its thread pool (librbd, the
object store's client and the parser's pipes all release the GIL while they wait).

A worker-family process: it holds the Ceph keyring and the database URL, as cairn-worker
does, which is why files are read here and not in cairn-api (which may not import the
worker, and should not hold a restore point open for a long download). The parser it
starts for each restore point holds neither (worker/files/sandbox.py)."""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import socket

import uvicorn

from services.clock import clock_for
from services.db import Database
from services.limits.leases import Leases
from services.settings import Settings, settings_for
from services.storage.ceph import CephClusters
from worker.files.app import create_app
from worker.files.calls import ParserCalls
from worker.files.http_protocol import FilesHttpProtocol, connections
from worker.files.open_points import StoredRestorePoints
from worker.files.service import FileLimits, FileService
from worker.files.session import ParserLimits, ParserSession
from worker.runtime import Runtime
from worker.targets.reader import RestorePointReader


def parser_limits(settings: Settings) -> ParserLimits:
    return ParserLimits(memory_bytes=settings.files_parser_memory_bytes,
                        cpu_seconds=settings.files_parser_cpu_seconds,
                        call_seconds=settings.files_call_seconds,
                        search_seconds=settings.files_search_seconds)


def runtime(settings: Settings) -> Runtime:
    """The worker's runtime, for reading only: no broker, no admission, no Cinder. Each
    open restore point may hold a database connection while it opens; a few more serve
    the status checks beside them."""
    db = Database(settings.database_url, pool_size=min(settings.files_sessions, 16) + 2)
    return Runtime(settings, db, CephClusters(settings),
                   f"cairn-files:{socket.gethostname()}:{os.getpid()}",
                   Leases.from_settings(settings), clock_for(settings.clock_file))


def build(settings: Settings) -> FileService:
    limits = parser_limits(settings)

    def parser(reader: RestorePointReader) -> ParserCalls:
        return ParserSession(reader, limits)

    points = StoredRestorePoints(runtime(settings), parser, settings.files_cache_bytes)
    return FileService(points, FileLimits.from_settings(settings))


def main() -> None:
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = settings_for("cairn-files")
    if settings.files_token is None:
        raise SystemExit("cairn-files: refusing to start: CAIRN_FILES_TOKEN is not set (the "
                         "token cairn-api presents: `openssl rand -hex 32`, the same for both)")
    # `kill -USR2 <pid>` writes every thread's stack to the log, as cairn-worker does.
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    faulthandler.enable(all_threads=True)
    host, port = settings.files_bind_address
    app = create_app(build(settings), settings.files_token.get_secret_value())
    # The token is checked once a request's headers are parsed: the protocol bounds them in
    # size and time before that (worker/files/http_protocol.py; uvicorn's httptools has
    # neither), and the process takes no more connections than it can work on.
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False,
                server_header=False, date_header=True, timeout_graceful_shutdown=30,
                http=FilesHttpProtocol, limit_concurrency=connections(settings))
