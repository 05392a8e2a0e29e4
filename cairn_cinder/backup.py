"""Cairn as a Cinder backup driver: `openstack volume backup create [--incremental]
[--force]`, `restore`, `delete`, `show`, `export`/`import` keep working on Cinder's API
while the data moves through Cairn's engine and lands as Cairn restore points of the
volume's project, visible and restorable through Cairn's API and portal too.

    [DEFAULT]
    backup_driver = cairn_cinder.backup.CairnBackupDriver
    [cairn]
    url = https://cairn.example.org:8787
    auth_type = password            # keystoneauth1's options: the cloud's administrator
    auth_url = https://keystone.example.org/v3
    username = cinder-backup
    password = ...
    project_name = admin            # a project in Cairn's admin_projects
    user_domain_name = Default
    project_domain_name = Default
    # target = local                # Cairn's backup target; Cairn's default when unset

It runs inside cinder-backup's own Python (Debian's python3-cinder) and imports only what
cinder-backup has (cinder, oslo.*, keystoneauth1); put the directory holding
`cairn_cinder/` on cinder-backup's PYTHONPATH. The REST calls and the reading of Cairn's
answers are in `cairn_api.py` (standard library only, unit-tested in Cairn's virtualenv).

Who acts: the driver's Keystone user is the cloud's administrator in Cairn's eyes (the admin
role in a project of Cairn's `admin_projects`). Cairn makes a backup of a Cinder volume
belong to the volume's project whoever asks, so every restore point lands in the backup's
project with no extra header; a restore for the driver (`cinder_backup: true`, over the
volume Cinder holds in `restoring-backup`) needs the policy rule
`restore_point:restore_for_cinder_backup` (the cloud's administrator by default).

No byte passes through cinder-backup. Cinder's backup manager always "attaches" the volume
before calling a driver (`continue_backup` and `_run_restore` call `_attach_device`; this
Cinder, 21.x, has no RBD special case in the manager any more): for an RBD volume that is
os-brick's RBD connector opening a librbd handle in cinder-backup's process
(`RBDVolumeIOWrapper`, no kernel map, no read), the handle Cinder's own Ceph driver
recognises (`_file_is_rbd`) to diff snapshots instead of reading. This driver never reads
or writes that handle: Cairn snapshots the volume's RBD image itself, copies with its
engine, and on restore writes the image through its own Ceph client while Cinder's handle
stays idle. What the manager requires of a driver to stay off the data path is only that:
return from `backup()` / `restore()` without touching `volume_file`. (cinder-backup still
needs to reach Ceph for that open: the keyring os-brick looks for, a `ceph.conf`.) For a
`--force` backup of an in-use volume Cinder's volume service first makes its temporary
clone (the RBD driver's copy-on-write clone) and attaches that; Cairn backs up the volume
itself (`backup.volume_id`), crash-consistent at Cairn's snapshot, as Cairn always does.

Cinder's incremental chain and Cairn's: Cinder's API chooses a parent for `--incremental`
and would count the child on it, refusing to delete the parent while the child exists.
Cairn's restore points are independent RBD snapshots: any one can be deleted in any order.
So `backup()` hands Cinder no parent (`parent_id` None): Cinder deletes its backups in any
order too, and `is_incremental` in `backup show` reads False; the kind Cairn made is in
`service_metadata` and in Cairn's restore point. A restore point deleted in Cairn (its API,
portal, or a plan's retention) leaves the Cinder record: restoring it fails with Cairn's
"not found", deleting it succeeds.
"""

from __future__ import annotations

import threading
from typing import Any

import requests
import requests.adapters
from cinder import exception
from cinder.backup import driver
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_log import log as logging

from cairn_cinder import cairn_api

LOG = logging.getLogger(__name__)
GROUP = "cairn"

cairn_opts = [
    cfg.URIOpt("url", help="Cairn's API, e.g. https://cairn.example.org:8787"),
    cfg.StrOpt("target", help="Cairn's backup target for Cinder's backups (Cairn's "
                              "default target when unset)"),
    cfg.FloatOpt("poll_interval", default=2.0, min=0.1,
                 help="Seconds between two looks at a running Cairn job"),
    cfg.IntOpt("job_timeout", default=86400, min=60,
               help="Seconds a backup, restore or delete may take in Cairn before Cinder "
                    "calls it failed (the job goes on in Cairn)"),
]

CONF = cfg.CONF
CONF.register_opts(cairn_opts, group=GROUP)
ks_loading.register_session_conf_options(CONF, GROUP)
ks_loading.register_auth_conf_options(CONF, GROUP)


def list_opts() -> list[tuple[str, list[Any]]]:
    return [(GROUP, cairn_opts)]


class CairnBackupDriver(driver.BackupDriver):
    """Cinder's backups, made, restored and deleted by Cairn."""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self._client: cairn_api.CairnClient | None = None

    # ------------------------------------------------------------ setup
    def check_for_setup_error(self) -> None:
        if not CONF[GROUP].url:
            raise exception.InvalidConfigurationValue(option="[cairn] url", value=None)
        status, answer = self.client.call("GET", "/v1/targets", None)
        if status != 200:
            raise exception.BackupDriverException(
                reason=f"Cairn at {CONF[GROUP].url}: {cairn_api.reason_of(status, answer)}")

    @property
    def client(self) -> cairn_api.CairnClient:
        if self._client is None:
            self._client = _shared_client()
        return self._client

    # ------------------------------------------------------------ the driver's calls
    def backup(self, backup: Any, volume_file: Any, backup_metadata: bool = False) -> dict:
        """Cairn snapshots and copies the volume; `volume_file` (Cinder's open librbd
        handle) is never read."""
        if backup.snapshot_id:
            raise _failure(f"Cairn backs up volumes, not Cinder snapshots: back up volume "
                           f"{backup.volume_id} itself (without --snapshot); Cairn takes "
                           "its own snapshot")
        kind = cairn_api.kind_of(backup.parent_id)
        target = CONF[GROUP].target
        rp_id = _cairn(lambda: self.client.backup(backup.volume_id, kind, target))
        LOG.info("Backup %s of volume %s is Cairn's restore point %s (%s).", backup.id,
                 backup.volume_id, rp_id, kind)
        # No parent: Cairn's restore points do not depend on each other (module docstring).
        return {"service_metadata": cairn_api.service_metadata(rp_id, kind, target),
                "parent_id": None}

    def restore(self, backup: Any, volume_id: str, volume_file: Any) -> None:
        """Cairn writes the restore point over the volume Cinder holds (a new one Cinder
        made for the restore, or the one named); `volume_file` is never written."""
        rp_id = cairn_api.restore_point_of(backup.service_metadata, backup.id)
        _cairn(lambda: self.client.restore(rp_id, volume_id))

    def delete_backup(self, backup: Any) -> None:
        if not backup.service_metadata:
            return  # failed before Cairn made anything
        rp_id = cairn_api.restore_point_of(backup.service_metadata, backup.id)
        if not _cairn(lambda: self.client.delete(rp_id)):
            LOG.warning("Cairn's restore point %s of backup %s was already deleted in "
                        "Cairn; deleting the Cinder record.", rp_id, backup.id)

    def export_record(self, backup: Any) -> dict:
        """The restore point's id (the record also carries `service_metadata`)."""
        return {"cairn_restore_point_id":
                cairn_api.restore_point_of(backup.service_metadata, backup.id)}

    def import_record(self, backup: Any, driver_info: dict) -> None:
        """An imported record must name a restore point Cairn still has, available, of the
        project the record is imported into."""
        rp_id = driver_info.get("cairn_restore_point_id")
        if not rp_id:
            raise _failure("the backup record names no Cairn restore point "
                           "(cairn_restore_point_id): it was not exported by Cairn's driver")
        _cairn(lambda: self.client.importable(rp_id, backup.project_id))


CONNECTIONS = 64
"""Connections to Cairn kept open at most (one per operation in flight, beyond which one
waits)."""

_client_lock = threading.Lock()
_client: cairn_api.CairnClient | None = None


def _shared_client() -> cairn_api.CairnClient:
    """The process's one client of Cairn. Cinder's manager makes a driver per operation
    (`self.service(context)`): a session each would cost a Keystone password
    authentication per backup and a token Cairn has never seen, validated anew; one
    session keeps one token, renewed by keystoneauth before it expires."""
    global _client
    with _client_lock:
        if _client is None:
            auth = ks_loading.load_auth_from_conf_options(CONF, GROUP)
            # requests keeps 10 connections a host: cinder-backup waits on up to
            # backup_max_operations jobs at once, and past 10 each look at a job would open
            # and drop a connection of its own ("Connection pool is full").
            http = requests.Session()
            adapter = requests.adapters.HTTPAdapter(pool_maxsize=CONNECTIONS)
            http.mount("https://", adapter)
            http.mount("http://", adapter)
            session = ks_loading.load_session_from_conf_options(CONF, GROUP, auth=auth,
                                                                session=http)
            base = CONF[GROUP].url.rstrip("/")

            def call(method: str, path: str, body: dict[str, Any] | None = None
                     ) -> tuple[int, Any]:
                response = session.request(base + path, method, json=body, raise_exc=False,
                                           headers={"Accept": "application/json"})
                try:
                    answer = response.json()
                except ValueError:
                    answer = None
                return response.status_code, answer

            _client = cairn_api.CairnClient(
                call, poll_seconds=CONF[GROUP].poll_interval,
                timeout_seconds=CONF[GROUP].job_timeout)
        return _client


def _failure(message: str) -> exception.BackupOperationError:
    """Cinder's manager puts str(exception) in the backup's fail_reason."""
    return exception.BackupOperationError(message)


def _cairn(step: Any) -> Any:
    try:
        return step()
    except cairn_api.CairnFailure as exc:
        raise _failure(str(exc)) from None
