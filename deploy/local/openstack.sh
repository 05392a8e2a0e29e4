#!/usr/bin/env bash
# A real Keystone and a real Cinder on loopback, for the local stack and the tests:
# RabbitMQ (Cinder's messaging) under a private node name, Keystone under uwsgi, and
# cinder-api (uwsgi), cinder-scheduler and cinder-volume with the RBD driver on the micro
# Ceph cluster ceph-a's `volumes` pool. Both keep their databases in the stack's PostgreSQL
# (Cinder on SQLite fails parallel requests with "database is locked").
# The daemons are Debian's, run by Debian's system Python 3, never the project's venv.
#
#   openstack.sh up|down|status
#   openstack.sh cinder-backup CAIRN_URL   (cinder-backup with Cairn's driver, cairn_cinder/)
#
# Needs the stack's PostgreSQL and ceph-a running (stack.sh starts them first).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
state=${CAIRN_STATE_DIR:-$repo/.state}
venv=${CAIRN_VENV:-$repo/.venv}
. "$here/lib.sh"
. "$here/ports.sh"

dir="$state/openstack"
log="$state/log"
run="$state/run"
mkdir -p "$dir" "$log" "$run"
keystone_url="http://127.0.0.1:$KEYSTONE_PORT/v3"
admin_password=${CAIRN_OS_ADMIN_PASSWORD:-cairn-admin}
pg_url() { echo "postgresql://postgres@127.0.0.1:$PG_PORT/$1"; }

ensure_database() {
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc "select 1 from pg_database where datname='$1'" \
        | grep -q 1 || psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "create database $1" >/dev/null
}

# ---------------------------------------------------------------- RabbitMQ
rabbit_env() {
    # The package's own script, called directly, honours these; its sbin wrapper would
    # switch to the rabbitmq user and the system directories instead.
    export HOME="$dir/rabbitmq" \
        RABBITMQ_NODENAME="cairn-rabbit@localhost" \
        RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$RABBIT_PORT" \
        RABBITMQ_DIST_PORT="$RABBIT_DIST_PORT" \
        ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT="$EPMD_PORT" \
        RABBITMQ_MNESIA_BASE="$dir/rabbitmq/mnesia" RABBITMQ_LOG_BASE="$log/rabbitmq" \
        RABBITMQ_PID_FILE="$run/rabbitmq.pid" \
        RABBITMQ_CONFIG_FILE="$dir/rabbitmq/rabbitmq" \
        RABBITMQ_ENABLED_PLUGINS_FILE="$dir/rabbitmq/enabled_plugins" \
        RABBITMQ_SERVER_START_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
}
rabbit_up() {
    (
        rabbit_env
        mkdir -p "$HOME" "$RABBITMQ_LOG_BASE"
        echo "[]." >"$RABBITMQ_ENABLED_PLUGINS_FILE"
        printf 'loopback_users.guest = true\nlisteners.tcp.default = %s\n' "$RABBIT_PORT" \
            >"$RABBITMQ_CONFIG_FILE.conf"
        if /usr/lib/rabbitmq/bin/rabbitmqctl -q status >/dev/null 2>&1; then
            echo "rabbitmq: already running (127.0.0.1:$RABBIT_PORT)"; exit 0
        fi
        require_free_port "$RABBIT_PORT" rabbitmq CAIRN_RABBIT_PORT
        quietly /usr/lib/rabbitmq/bin/rabbitmq-server -detached
        wait_for 60 rabbitmq /usr/lib/rabbitmq/bin/rabbitmqctl -q await_startup
        echo "rabbitmq: up (127.0.0.1:$RABBIT_PORT)"
    )
}
rabbit_down() {
    (
        rabbit_env
        /usr/lib/rabbitmq/bin/rabbitmqctl -q stop >/dev/null 2>&1 || true
        # epmd was started for this node on its own port; it outlives the node otherwise.
        pkill -f "epmd.*-port $EPMD_PORT" 2>/dev/null || true
        epmd -port "$EPMD_PORT" -kill >/dev/null 2>&1 || true
    )
    echo "rabbitmq: stopped"
}

# ---------------------------------------------------------------- Keystone
keystone_conf="$dir/keystone/keystone.conf"
keystone_up() {
    mkdir -p "$dir/keystone"
    ensure_database keystone
    cat >"$keystone_conf" <<CONF
[DEFAULT]
log_file = $log/keystone.log
[database]
connection = $(pg_url keystone)
[token]
provider = fernet
expiration = ${CAIRN_KEYSTONE_TOKEN_SECONDS:-3600}
[fernet_tokens]
key_repository = $dir/keystone/fernet-keys
[fernet_receipts]
key_repository = $dir/keystone/fernet-receipts
[credential]
key_repository = $dir/keystone/credential-keys
[identity]
# bcrypt at cost 12 makes each token ~280 ms; this is a test and development Keystone.
password_hash_rounds = 4
CONF
    if pid_alive "$run/keystone.pid"; then echo "keystone: already running ($keystone_url)"; return; fi
    require_free_port "$KEYSTONE_PORT" keystone CAIRN_KEYSTONE_PORT
    local km=(keystone-manage --config-file "$keystone_conf")
    # The marker holds the URL bootstrapped with: a stack moved to another port bootstraps
    # again, which points the catalog's identity endpoints at the new URL.
    if [ "$(cat "$dir/keystone/bootstrapped" 2>/dev/null)" != "$keystone_url" ]; then
        {
        "${km[@]}" db_sync
        "${km[@]}" fernet_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)"
        "${km[@]}" credential_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)"
        "${km[@]}" bootstrap --bootstrap-password "$admin_password" \
            --bootstrap-admin-url "$keystone_url" --bootstrap-internal-url "$keystone_url" \
            --bootstrap-public-url "$keystone_url" --bootstrap-region-id RegionOne
        } >>"$log/keystone-manage.log" 2>&1
        echo "$keystone_url" >"$dir/keystone/bootstrapped"
    fi
    # http-socket closes each connection after the response: say so (Connection: close),
    # or keystoneauth's pool reuses sockets uwsgi already closed.
    uwsgi --plugin python3 --http-socket "127.0.0.1:$KEYSTONE_PORT" \
        --wsgi-file /usr/bin/keystone-wsgi-public --master --processes 2 --threads 4 \
        --lazy-apps --add-header "Connection: close" --buffer-size 65535 \
        --env "OS_KEYSTONE_CONFIG_FILES=$keystone_conf" --die-on-term \
        --pidfile "$run/keystone.pid" --daemonize "$log/keystone-uwsgi.log" >/dev/null
    wait_for 60 keystone curl -sf "$keystone_url"
    echo "keystone: up ($keystone_url)"
}

# ---------------------------------------------------------------- Cinder
cinder_conf="$dir/cinder/cinder.conf"
cinder_password=cairn-cinder
cinder_up() {
    mkdir -p "$dir/cinder/state" "$dir/cinder/locks"
    ensure_database cinder
    cat >"$cinder_conf" <<CONF
[DEFAULT]
transport_url = rabbit://guest:guest@127.0.0.1:$RABBIT_PORT/
auth_strategy = keystone
enabled_backends = ceph
state_path = $dir/cinder/state
api_paste_config = /etc/cinder/api-paste.ini
log_dir = $log
my_ip = 127.0.0.1
host = cairn-local
# The default (10 volumes) is too few for a test suite that makes volumes per test.
quota_volumes = 200
quota_gigabytes = 2000
quota_snapshots = 200
[database]
connection = $(pg_url cinder)
[keystone_authtoken]
www_authenticate_uri = http://127.0.0.1:$KEYSTONE_PORT
auth_url = http://127.0.0.1:$KEYSTONE_PORT
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = cinder
password = $cinder_password
[oslo_concurrency]
lock_path = $dir/cinder/locks
[coordination]
backend_url = file://$dir/cinder/locks
[ceph]
volume_driver = cinder.volume.drivers.rbd.RBDDriver
volume_backend_name = ceph
rbd_pool = volumes
rbd_ceph_conf = $state/ceph-a/ceph.conf
rbd_user = admin
rbd_flatten_volume_from_snapshot = false
CONF
    if pid_alive "$run/cinder-api.pid" && pid_alive "$run/cinder-scheduler.pid" \
        && pid_alive "$run/cinder-volume.pid"; then
        echo "cinder: already running (http://127.0.0.1:$CINDER_PORT)"; return
    fi
    require_free_port "$CINDER_PORT" cinder-api CAIRN_CINDER_PORT
    cinder-manage --config-file "$cinder_conf" db sync >>"$log/cinder-manage.log" 2>&1
    # Cinder's service user and its catalog entry, made once, idempotently.
    "$venv/bin/python" "$here/openstack_seed.py" cinder --password "$cinder_password" \
        --endpoint "http://127.0.0.1:$CINDER_PORT/v3/%(project_id)s"
    uwsgi --plugin python3 --http-socket "127.0.0.1:$CINDER_PORT" \
        --wsgi-file /usr/bin/cinder-wsgi --pyargv "--config-file $cinder_conf" \
        --master --processes 2 --threads 4 --lazy-apps --add-header "Connection: close" \
        --buffer-size 65535 --die-on-term \
        --pidfile "$run/cinder-api.pid" --daemonize "$log/cinder-api-uwsgi.log" >/dev/null
    for name in cinder-scheduler cinder-volume; do
        pid_alive "$run/$name.pid" && continue
        ( exec setsid "$name" --config-file "$cinder_conf" >>"$log/$name.out" 2>&1 </dev/null ) &
        echo $! >"$run/$name.pid"
    done
    # Services reported "up" are not ready yet: the scheduler must know the RBD pool.
    if ! wait_for 120 cinder "$venv/bin/python" "$here/openstack_seed.py" cinder-ready; then
        echo "cinder: see $log/cinder-*.log" >&2; return 1
    fi
    echo "cinder: up (http://127.0.0.1:$CINDER_PORT)"
}
cinder_down() {
    for name in cinder-volume cinder-scheduler cinder-api; do
        stop_pidfile "$run/$name.pid" "$name"
    done
    echo "cinder: stopped"
}

# ---------------------------------------------------------------- cinder-backup, Cairn's driver
# `make up OPENSTACK=1 CINDER_BACKUP=cairn`: Cinder's backup API served by Cairn's engine
# (docs/openstack.md, "For operators coming from cinder-backup"). The driver runs in
# cinder-backup's own Python, found on PYTHONPATH from this checkout; it acts as the
# Keystone user cinder-backup, the admin of project `admin` (Cairn's admin project).
backup_password=cairn-cinder-backup
cinder_backup_up() {
    local cairn_url=$1 conf="$dir/cinder/cinder-backup.conf"
    if pid_alive "$run/cinder-backup.pid"; then echo "cinder-backup: already running"; return; fi
    "$venv/bin/python" "$here/openstack_seed.py" cinder-backup --password "$backup_password"
    # os-brick opens the volume's RBD image in cinder-backup before any driver runs; it
    # looks for the keyring a backup host has (the local cluster has no cephx: any key).
    [ -e /etc/ceph/ceph.client.admin.keyring ] || { mkdir -p /etc/ceph && ceph-authtool \
        --create-keyring /etc/ceph/ceph.client.admin.keyring --gen-key -n client.admin >/dev/null; }
    sed '0,/^\[DEFAULT\]$/s//[DEFAULT]\nbackup_driver = cairn_cinder.backup.CairnBackupDriver\nbackup_driver_stats_polling_interval = 10/' \
        "$cinder_conf" >"$conf"
    cat >>"$conf" <<CONF
[cairn]
url = $cairn_url
auth_type = password
auth_url = http://127.0.0.1:$KEYSTONE_PORT/v3
username = cinder-backup
password = $backup_password
project_name = admin
user_domain_name = Default
project_domain_name = Default
CONF
    ( exec setsid env PYTHONPATH="$repo" cinder-backup --config-file "$conf" \
        >>"$log/cinder-backup.out" 2>&1 </dev/null ) &
    echo $! >"$run/cinder-backup.pid"
    echo "cinder-backup: up with Cairn's driver ($cairn_url); Cinder places backups on it" \
         "once it has reported (10-20 s)"
}

case "${1:-status}" in
    up)
        rabbit_up
        keystone_up
        cinder_up
        ;;
    cinder-backup)
        cinder_backup_up "${2:?usage: openstack.sh cinder-backup CAIRN_URL}"
        ;;
    down)
        stop_pidfile "$run/cinder-backup.pid" cinder-backup
        cinder_down
        stop_pidfile "$run/keystone.pid" keystone; echo "keystone: stopped"
        rabbit_down
        ;;
    status)
        for name in keystone cinder-api cinder-scheduler cinder-volume cinder-backup; do
            if pid_alive "$run/$name.pid"; then echo "$name: up"; else echo "$name: down"; fi
        done
        ;;
    *) echo "usage: openstack.sh up|down|status" >&2; exit 2 ;;
esac
