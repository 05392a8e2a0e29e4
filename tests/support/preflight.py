"""Before the integration tier runs, once per run: are the stack's servers up, and can its
Ceph clusters take the tests' data? A memstore OSD holds every byte in RAM up to its cap
(4 GiB), and a full one blocks every later write: a stack used for a while, or a run that
left images behind, used to fail one test and then hang the next inside librbd. Now the
run stops at once with the cluster's name, how full it is, and what to do."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import rados

from tests.support import ceph, rgw

CLUSTERS = ("ceph-a", "ceph-b")
FULL_AT = 0.80
"""Of the OSD store's capacity. Ceph itself warns at 85 % (nearfull) and stops writes at
95 %; a run adds a few hundred MiB at once under xdist, so it must start well below."""
BLOCKING_CHECKS = {
    "OSD_FULL": "an OSD is full: writes are refused or block",
    "OSD_BACKFILLFULL": "an OSD is too full to move data",
    "OSD_NEARFULL": "an OSD is nearly full",
    "POOL_FULL": "a pool is full: writes block",
    "POOL_NEARFULL": "a pool is nearly full",
    "OSD_DOWN": "an OSD is down: reads and writes to it block",
    "OSDMAP_FLAGS": "OSD map flags are set (`ceph osd pause` left behind?): I/O may block",
    "PG_AVAILABILITY": "placement groups are inactive: I/O to them blocks",
}
GiB = 1 << 30


def cluster_problem(name: str, stores: Mapping[int, tuple[int, int]],
                    health: Mapping[str, Any], full_at: float = FULL_AT) -> str | None:
    """What makes this cluster unfit for a run, or None: from its OSDs' stores (OSD id ->
    bytes used, capacity) and `ceph health` (JSON)."""
    checks = health.get("checks", {})
    found = [f"{code} ({checks[code].get('summary', {}).get('message', why)}: {why})"
             for code, why in BLOCKING_CHECKS.items() if code in checks]
    if found:
        return f"{name}: Ceph reports {'; '.join(found)}"
    for osd, (used, total) in sorted(stores.items()):
        if total and used / total > full_at:
            return (f"{name}: osd.{osd} holds {used / GiB:.2f} of {total / GiB:.2f} GiB "
                    f"({100 * used / total:.0f} %, more than {100 * full_at:.0f} %): the "
                    "tests' data would fill it and block. Remove what earlier runs left "
                    f"(`rbd -c {ceph.conf_path(name)} ls -l volumes`, and `backups`), or "
                    "start the stack anew (`make down`, then `make test`: a memstore OSD "
                    "starts empty)")
    return None


def _mon(handle: rados.Rados, prefix: str) -> Any:
    ret, out, err = handle.mon_command(json.dumps({"prefix": prefix, "format": "json"}), b"",
                                       timeout=10)
    if ret != 0:
        raise RuntimeError(f"`ceph {prefix}` failed: {err}")
    return json.loads(out)


def _store(handle: rados.Rados, osd: int) -> tuple[int, int]:
    """An OSD's bytes used and capacity, from the OSD itself (`ceph tell osd.N perf dump`):
    the micro clusters run no mgr, so `ceph df` knows nothing."""
    ret, out, err = handle.osd_command(osd, json.dumps({"prefix": "perf dump"}), b"",
                                       timeout=10)
    if ret != 0:
        raise RuntimeError(f"`ceph tell osd.{osd} perf dump` failed: {err}")
    counters = json.loads(out)["osd"]
    return int(counters["stat_bytes_used"]), int(counters["stat_bytes"])


def check_cluster(name: str, full_at: float = FULL_AT) -> str | None:
    """The problem of one running cluster, or None; a cluster that does not answer within
    seconds is a problem too."""
    try:
        handle = ceph.connect(name, rados_mon_op_timeout="10", rados_osd_op_timeout="10")
    except Exception as exc:
        return f"{name}: does not answer ({type(exc).__name__}: {exc})"
    try:
        health = _mon(handle, "health")
        stores = {osd: _store(handle, osd) for osd in _mon(handle, "osd ls")}
        return cluster_problem(name, stores, health, full_at)
    except Exception as exc:
        return f"{name}: does not answer ({type(exc).__name__}: {exc})"
    finally:
        handle.shutdown()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def missing_servers(redis_port: int, pg_port: int) -> list[str]:
    return [what for what, ok in [
        ("micro Ceph ceph-a", ceph.conf_path("ceph-a").exists()),
        ("micro Ceph ceph-b (CAIRN_SECOND_CLUSTER=1)", ceph.conf_path("ceph-b").exists()),
        ("Ceph RGW on ceph-a (CAIRN_RGW=1)", rgw.CREDENTIALS.exists()),
        (f"Redis on {redis_port}", _listening(redis_port)),
        (f"PostgreSQL on {pg_port}", _listening(pg_port)),
    ] if not ok]


def problems(redis_port: int, pg_port: int) -> str | None:
    """Why the integration tier cannot run here, or None."""
    missing = missing_servers(redis_port, pg_port)
    if missing:
        return (f"the local stack is not running ({', '.join(missing)}): run `make test`, "
                "which starts it")
    found = [p for p in (check_cluster(name) for name in CLUSTERS) if p]
    if found:
        return "a Ceph cluster of the stack cannot take the tests' data:\n  " \
            + "\n  ".join(found)
    return None


def wanted(args: list[str], invocation_dir: Path, rootdir: Path) -> bool:
    """Whether a run of these paths reaches the integration tier."""
    tier = (rootdir / "tests" / "integration").resolve()
    for arg in args or ["tests"]:
        path = (invocation_dir / arg.split("::")[0]).resolve()
        if path == tier or tier in path.parents or path in tier.parents:
            return True
    return False
