"""Debian's cinder-backup beside the local stack's Cinder, with Cinder's own Ceph driver or
with Cairn's (cairn_cinder.backup), for the driver's test and `bench/fleet.py`.

One cinder-backup at a time, under the stack's Cinder host name: the scheduler keeps the
last state each backup host reported for ever (it places a backup on any host that ever
said it was working), so a second host would be given backups after its process stopped;
under one name, the process running is the one that gets them. A new process is ready when
a probe backup made through Cinder's API succeeds, not when os-services says `up`: the
scheduler places backups only on a host whose state it has received, which the first run of
`make bench-fleet` on a fresh machine met as "Service not found for creating backup"."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.openstack.cinder import CinderApi
from tests.support.stack import REPO

STATE = Path(os.environ.get("CAIRN_STATE_DIR", REPO / ".state"))
CEPH_CONF = STATE / "ceph-a" / "ceph.conf"
STATS_SECONDS = 10
"""cinder-backup's state reports (Cinder's minimum; a minute by default)."""
CEPH_POOL = "cinder-backups"


@dataclass(frozen=True)
class Concurrency:
    """How many backups cinder-backup runs at once: `backup_workers` processes, each
    running at most `backup_max_operations` (Cinder's defaults 1 and 15)."""

    workers: int = 1
    max_operations: int = 15

    def __str__(self) -> str:
        return f"{self.workers} worker x {self.max_operations} operations"


def ceph_driver_options() -> dict[str, str]:
    return {"backup_driver": "cinder.backup.drivers.ceph.CephBackupDriver",
            "backup_ceph_conf": str(CEPH_CONF), "backup_ceph_user": "admin",
            "backup_ceph_pool": CEPH_POOL, "backup_ceph_chunk_size": "134217728"}


def cairn_driver_options(cairn_url: str, *, username: str, password: str, project: str,
                         auth_url: str, target: str | None = None) -> dict[str, str]:
    """Cairn's driver, acting as `username`, who must be the cloud's administrator in
    Cairn's eyes (the admin role in a project of Cairn's admin_projects)."""
    options = {"backup_driver": "cairn_cinder.backup.CairnBackupDriver",
               "[cairn] url": cairn_url, "[cairn] auth_type": "password",
               "[cairn] auth_url": auth_url, "[cairn] username": username,
               "[cairn] password": password, "[cairn] project_name": project,
               "[cairn] user_domain_name": "Default",
               "[cairn] project_domain_name": "Default", "[cairn] poll_interval": "0.5"}
    if target:
        options["[cairn] target"] = target
    return options


def write_conf(path: Path, options: dict[str, str], concurrency: Concurrency) -> Path:
    """The stack's cinder.conf with the backup driver's options (`[group] name` keys go to
    their own section)."""
    base = (STATE / "openstack" / "cinder" / "cinder.conf").read_text()
    default = {k: v for k, v in options.items() if not k.startswith("[")}
    default |= {"backup_driver_stats_polling_interval": str(STATS_SECONDS),
                "backup_workers": str(concurrency.workers),
                "backup_max_operations": str(concurrency.max_operations)}
    text = base.replace("[DEFAULT]\n", "[DEFAULT]\n" + "".join(
        f"{k} = {v}\n" for k, v in default.items()), 1)
    sections: dict[str, list[str]] = {}
    for key, value in options.items():
        if key.startswith("["):
            group, name = key[1:].split("] ")
            sections.setdefault(group, []).append(f"{name} = {value}\n")
    for group, lines in sections.items():
        text += f"[{group}]\n" + "".join(lines)
    path.write_text(text)
    return path


def ensure_backup_host_keyring() -> None:
    """cinder-backup opens a volume through os-brick (Cinder's manager does it before any
    driver, Cairn's too), which looks for the Ceph user's keyring at
    /etc/ceph/ceph.client.<user>.keyring, as on a real backup host. The local cluster runs
    without cephx, so any key does; an existing file is never touched."""
    keyring = Path("/etc/ceph/ceph.client.admin.keyring")
    if keyring.exists():
        return
    keyring.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ceph-authtool", "--create-keyring", str(keyring), "--gen-key",
                    "-n", "client.admin"], check=True, capture_output=True)


@dataclass
class BackupService:
    proc: subprocess.Popen[bytes]
    log: Path
    concurrency: Concurrency

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def start(conf: Path, log: Path, concurrency: Concurrency) -> BackupService:
    """Start cinder-backup (Debian's, system Python) on `conf`; cairn_cinder is found on
    PYTHONPATH, from this checkout."""
    binary = shutil.which("cinder-backup")
    if binary is None:
        raise RuntimeError("cinder-backup is not installed: `make test` and `make "
                           "bench-fleet` install it (deploy/local/bootstrap.sh)")
    ensure_backup_host_keyring()
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with log.open("ab") as out:
        proc = subprocess.Popen([binary, "--config-file", str(conf)], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)
    return BackupService(proc, log, concurrency)


def _backup_call(api: CinderApi, method: str, path: str, **kwargs: Any) -> Any:
    return api.session.request(path, method, endpoint_filter=api.endpoint_filter,
                               raise_exc=False, **kwargs)


def wait_until_placeable(service: BackupService, member: CinderApi, volume_id: str,
                         timeout: float = 300) -> float:
    """Until Cinder places a backup on the new process and it succeeds: a probe backup of
    `volume_id` (a small volume of `member`'s project), deleted again. Returns the seconds
    it took."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    last = ""
    while time.monotonic() < deadline:
        if service.proc.poll() is not None:
            raise RuntimeError(f"cinder-backup exited ({service.proc.returncode}); see "
                               f"{service.log}")
        made = _backup_call(member, "POST", "/backups", json={"backup": {
            "volume_id": volume_id, "name": "cairn-probe", "force": True}})
        if made.status_code != 202:
            last = made.text
            time.sleep(2)
            continue
        backup_id = made.json()["backup"]["id"]
        backup = wait_backup(member, backup_id, deadline - time.monotonic())
        if backup["status"] == "available":
            delete_backup(member, backup_id)
            return time.monotonic() - t0
        last = str(backup.get("fail_reason"))
        # "Service not found for creating backup": the scheduler has no state of ours yet.
        _backup_call(member, "DELETE", f"/backups/{backup_id}")
        time.sleep(STATS_SECONDS / 2)
    raise RuntimeError(f"Cinder placed no backup on cinder-backup within {timeout:.0f} s "
                       f"(last: {last}); see {service.log}")


def wait_backup(api: CinderApi, backup_id: str, timeout: float = 300,
                until: tuple[str, ...] = ("available", "error")) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    backup: dict[str, Any] = {}
    while time.monotonic() < deadline:
        backup = _backup_call(api, "GET", f"/backups/{backup_id}").json()["backup"]
        if backup["status"] in until:
            return backup
        time.sleep(0.5)
    raise AssertionError(f"backup {backup_id} still {backup.get('status')}: {backup}")


def delete_backup(api: CinderApi, backup_id: str, timeout: float = 120) -> None:
    _backup_call(api, "DELETE", f"/backups/{backup_id}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _backup_call(api, "GET", f"/backups/{backup_id}").status_code == 404:
            return
        time.sleep(0.5)
    raise AssertionError(f"backup {backup_id} was not deleted within {timeout:.0f} s")
