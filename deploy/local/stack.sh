#!/usr/bin/env bash
# The local stack, on loopback only: micro Ceph (cluster ceph-a, and ceph-b on request),
# Redis, PostgreSQL and the Cairn processes. Idempotent: `up` starts what is not running,
# `down` stops by PID file what is.
#
#   stack.sh up|down|status [infra|all]     (default: all)
#
# Environment: CAIRN_STATE_DIR (default <repo>/.state), CAIRN_SECOND_CLUSTER=1 to start
# ceph-b as well, CAIRN_OPENSTACK=1 to start Keystone and Cinder too (Cairn then
# authenticates with Keystone and protects Cinder volumes), CAIRN_PROMETHEUS=1 to run
# Prometheus scraping Cairn with its alert rules, CAIRN_RGW=1 to run Ceph RGW (an S3
# endpoint with a bucket) on ceph-a, CAIRN_API_PORT (default 8787), CAIRN_FILES_PORT
# (cairn-files, default 31880).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export CAIRN_STATE_DIR=${CAIRN_STATE_DIR:-$repo/.state}
state=$CAIRN_STATE_DIR
venv=${CAIRN_VENV:-$repo/.venv}
. "$here/lib.sh"
. "$here/ports.sh"

cmd=${1:-status}
scope=${2:-all}
second=${CAIRN_SECOND_CLUSTER:-0}
openstack=${CAIRN_OPENSTACK:-0}
prometheus=${CAIRN_PROMETHEUS:-0}
rgw=${CAIRN_RGW:-0}
mkdir -p "$state"

# ---------------------------------------------------------------- Redis
redis_pid="$state/redis/redis.pid"
redis_up() {
    mkdir -p "$state/redis"
    if pid_alive "$redis_pid"; then echo "redis: already running (127.0.0.1:$REDIS_PORT)"; return; fi
    require_free_port "$REDIS_PORT" redis CAIRN_REDIS_PORT
    # 64 databases: every concurrent test session (pytest-xdist workers, `make soak`) keeps
    # its broker and leases in databases of its own.
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" \
        --databases 64 --appendonly no --dir "$state/redis" --pidfile "$redis_pid" \
        --logfile "$state/redis/redis.log" >/dev/null
    wait_for 10 redis redis-cli -p "$REDIS_PORT" ping
    echo "redis: up (127.0.0.1:$REDIS_PORT)"
}

# ---------------------------------------------------------------- PostgreSQL
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
pg_dir="$state/postgres"
# initdb runs as the postgres user, which cannot reach a checkout under a private directory
# (e.g. /root): keep the data beside the other state where it can, under /var/tmp otherwise.
if [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$state"; then
    pg_dir="/var/tmp/cairn-postgres-$(printf '%s' "$state" | sha1sum | cut -c1-12)"
fi
as_pg() {
    # initdb and pg_ctl refuse to run as root: run them as the postgres user then.
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
pg_up() {
    if [ ! -f "$pg_dir/data/PG_VERSION" ]; then
        mkdir -p "$pg_dir"
        if [ "$(id -u)" = 0 ]; then chown postgres: "$pg_dir"; fi
        as_pg "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust -E UTF8 >"$pg_dir/initdb.log"
    fi
    if as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" status >/dev/null 2>&1; then
        echo "postgres: already running (127.0.0.1:$PG_PORT)"
    else
        require_free_port "$PG_PORT" postgres CAIRN_PG_PORT
        as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/postgres.log" -w -t 60 start \
            -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $pg_dir -c fsync=off -c max_connections=300" >/dev/null
        echo "postgres: up (127.0.0.1:$PG_PORT)"
    fi
    for db in cairn cairn_test; do
        psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc "select 1 from pg_database where datname='$db'" | grep -q 1 \
            || psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "create database $db" >/dev/null
    done
}
pg_down() {
    if [ -f "$pg_dir/data/PG_VERSION" ] && as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" status >/dev/null 2>&1; then
        as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w stop >/dev/null
    fi
    echo "postgres: stopped"
}

# ---------------------------------------------------------------- Cairn processes
env_file="$state/cairn.env"
# cairn.env holds the database's and Keystone's passwords: its user's alone (made under
# umask 077, and an older one's mode put right). The files token is not in it: only
# cairn-api and cairn-files are given it (run_cairn).
write_env() {
    (umask 077 && : >>"$env_file")
    chmod 600 "$env_file"
    files_token >/dev/null
    cat >"$env_file" <<ENV
CAIRN_ENVIRONMENT=development
CAIRN_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:$PG_PORT/cairn
CAIRN_REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0
CAIRN_CLUSTERS='{"ceph-a": {"conf": "$state/ceph-a/ceph.conf"}$( [ "$second" = 1 ] && printf ', "ceph-b": {"conf": "%s"}' "$state/ceph-b/ceph.conf")}'
CAIRN_BACKUP_TARGETS='{"local": {"cluster": "ceph-a", "pool": "backups"}$( [ "$second" = 1 ] && printf ', "offsite": {"cluster": "ceph-b", "pool": "backups"}')}'
CAIRN_DEFAULT_BACKUP_TARGET=local
CAIRN_WORKER_METRICS_PORT=$WORKER_METRICS_PORT
CAIRN_SCHEDULER_METRICS_PORT=$SCHEDULER_METRICS_PORT
CAIRN_API_METRICS_PORT=$API_METRICS_PORT
CAIRN_PORTAL_SESSION_KEY_FILE=$state/portal-session.key
CAIRN_WEBHOOK_SECRET_KEY_FILE=$state/webhook-secret.key
CAIRN_FILES_URL=http://127.0.0.1:$FILES_PORT
CAIRN_FILES_BIND=127.0.0.1:$FILES_PORT
ENV
    # The key sealing the portal's session cookies: made once, so a restart keeps sessions.
    [ -s "$state/portal-session.key" ] || (umask 077 && od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' >"$state/portal-session.key")
    # The key sealing webhooks' signing secrets in the database: made once (a new key
    # opens none of the secrets sealed under the old one).
    [ -s "$state/webhook-secret.key" ] || (umask 077 && od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' >"$state/webhook-secret.key")
    # Webhook receivers on this machine (loopback) are private addresses: allowed only when
    # asked, e.g. CAIRN_WEBHOOK_ALLOWED_NETWORKS='["127.0.0.0/8"]' make up.
    if [ -n "${CAIRN_WEBHOOK_ALLOWED_NETWORKS:-}" ]; then
        printf "CAIRN_WEBHOOK_ALLOWED_NETWORKS='%s'\n" "$CAIRN_WEBHOOK_ALLOWED_NETWORKS" >>"$env_file"
    fi
    if [ "$openstack" = 1 ]; then
        # The cloud's administrator is the admin role in Keystone's project `admin`, named
        # by id (Keystone's bootstrap made it; a name is unique only within its domain).
        local admin_project
        admin_project=$("$venv/bin/python" "$here/openstack_seed.py" admin-project-id)
        cat >>"$env_file" <<ENV
CAIRN_AUTH_STRATEGY=keystone
CAIRN_KEYSTONE='{"auth_url": "http://127.0.0.1:$KEYSTONE_PORT/v3", "username": "cairn", "password": "$cairn_password", "project_name": "service", "region_name": "RegionOne"}'
CAIRN_CINDER='{"cluster": "ceph-a", "pool": "volumes"}'
CAIRN_ADMIN_PROJECTS='["$admin_project"]'
ENV
    else
        # noauth (a development stack on loopback): the caller says its project, and the
        # admin role in project `admin` is the cloud's administrator, as with Keystone.
        # Without Cinder, the volumes are the RBD images of ceph-a's pool `volumes` (the
        # demo volume's): the portal's Volumes page lists them.
        cat >>"$env_file" <<'ENV'
CAIRN_AUTH_STRATEGY=noauth
CAIRN_ADMIN_PROJECTS='["admin"]'
CAIRN_VOLUME_POOLS='{"ceph-a": ["volumes"]}'
ENV
    fi
    if [ "$rgw" = 1 ]; then
        # An object target on the local RGW, with an operator key made once for this stack.
        local s3="$state/rgw-ceph-a/s3.json" key="$state/object-target.key"
        [ -s "$key" ] || (umask 077 && od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' >"$key")
        "$venv/bin/python" - "$s3" "$key" >>"$env_file" <<'PY'
import json, sys
s3 = json.load(open(sys.argv[1]))
target = {"endpoint": s3["endpoint"], "bucket": s3["bucket"], "region": s3["region"],
          "prefix": "cairn", "credentials_file": sys.argv[1]}
print(f"CAIRN_OBJECT_TARGETS='{json.dumps({'s3': target})}'")
print(f"CAIRN_OBJECT_KEY_FILE={sys.argv[2]}")
PY
    fi
}
cairn_password=cairn-service
# The token cairn-api presents to cairn-files: made once for this stack (a restart of one
# of the two keeps it), readable by its user only.
files_token() {
    local file="$state/files.token"
    [ -s "$file" ] || (umask 077 && od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' >"$file")
    cat "$file"
}
# run_cairn NAME CMD...: start a Cairn process unless it runs with this very configuration
# (the env file and its command line). One that runs with another (`make up` again with
# other switches) is restarted, and the names of the settings that changed are printed.
run_cairn() {
    local name=$1; shift
    local pidfile="$state/run/$name.pid" conf="$state/run/$name.conf" log="$state/log/$name.log"
    local want
    mkdir -p "$state/run" "$state/log"
    want=$(printf 'command: %s\n' "$*"; cat "$env_file")
    if pid_alive "$pidfile"; then
        if [ -f "$conf" ] && [ "$(cat "$conf")" = "$want" ]; then
            echo "$name: already running"
            return
        fi
        echo "$name: configuration changed ($(changed_settings "$conf" "$want")); restarting"
        stop_pidfile "$pidfile" "$name"
    fi
    touch "$log"
    stat -c %s "$log" >"$state/run/$name.log-start"
    (
        set -a; . "$env_file"; set +a
        case "$name" in
            # The two ends of the file service's token; no other process holds it.
            cairn-api|cairn-files) CAIRN_FILES_TOKEN=$(cat "$state/files.token")
                                   export CAIRN_FILES_TOKEN ;;
        esac
        exec setsid "$@" >>"$log" 2>&1 </dev/null
    ) &
    echo $! >"$pidfile"
    (umask 077 && printf '%s\n' "$want" >"$conf")
    chmod 600 "$conf"
}

# changed_settings OLD_CONF NEW_TEXT: the names (never the values: the env holds a
# password) of what differs, e.g. "CAIRN_AUTH_STRATEGY, CAIRN_KEYSTONE".
changed_settings() {
    local names
    names=$( { [ -f "$1" ] && cat "$1"; printf '%s\n' "$2"; } | sort | uniq -u \
             | sed -E 's/^(command):.*/command line/; s/=.*//' | sort -u | paste -sd, - \
             | sed 's/,/, /g')
    echo "${names:-not recorded}"
}

worker_ready() { log_since_start cairn-worker | grep -q ready; }

# log_since_start NAME: what the process wrote since this script last started it.
log_since_start() {
    local start=0
    [ -f "$state/run/$1.log-start" ] && start=$(cat "$state/run/$1.log-start")
    tail -c +"$((start + 1))" "$state/log/$1.log"
}

cairn_up() {
    write_env
    ( set -a; . "$env_file"; set +a; "$venv/bin/cairn-manage" db upgrade )
    pid_alive "$state/run/cairn-api.pid" || require_free_port "$API_PORT" cairn-api CAIRN_API_PORT
    run_cairn cairn-api "$venv/bin/cairn-api" --host 127.0.0.1 --port "$API_PORT"
    run_cairn cairn-worker "$venv/bin/cairn-worker"
    run_cairn cairn-scheduler "$venv/bin/cairn-scheduler"
    pid_alive "$state/run/cairn-files.pid" || require_free_port "$FILES_PORT" cairn-files CAIRN_FILES_PORT
    run_cairn cairn-files "$venv/bin/cairn-files"
    wait_for 30 cairn-api curl -sf "http://127.0.0.1:$API_PORT/healthz"
    echo "cairn-api: up (http://127.0.0.1:$API_PORT)"
    wait_for 30 cairn-files curl -sf "http://127.0.0.1:$FILES_PORT/healthz"
    echo "cairn-files: up (http://127.0.0.1:$FILES_PORT, cairn-api's only)"
    if [ "$openstack" = 1 ]; then
        (
            export OS_AUTH_URL="http://127.0.0.1:$KEYSTONE_PORT/v3" OS_USERNAME=admin \
                OS_PASSWORD="${CAIRN_OS_ADMIN_PASSWORD:-cairn-admin}" OS_PROJECT_NAME=admin \
                OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default
            "$venv/bin/cairn-manage" keystone register --url "http://127.0.0.1:$API_PORT" \
                --region RegionOne >/dev/null
        )
        "$venv/bin/python" "$here/openstack_seed.py" demo --clouds-yaml "$state/clouds.yaml"
        if [ "${CAIRN_CINDER_BACKUP:-0}" = cairn ]; then
            "$here/openstack.sh" cinder-backup "http://127.0.0.1:$API_PORT"
        fi
    fi
    wait_for 30 cairn-worker worker_ready
    echo "cairn-worker: up"
    if pid_alive "$state/run/cairn-scheduler.pid"; then echo "cairn-scheduler: up"
    else echo "cairn-scheduler: did not start; see $state/log/cairn-scheduler.log" >&2; return 1; fi
}
# Prometheus (CAIRN_PROMETHEUS=1): Debian's server on loopback, scraping the three Cairn
# processes every 15 s with the alert rules of deploy/prometheus/. Started like a Cairn
# process, so `make up` without the switch stops it and with other ports restarts it.
prometheus_up() {
    local dir="$state/prometheus"
    mkdir -p "$dir"
    cat >"$dir/prometheus.yml" <<YAML
global: {scrape_interval: 15s, evaluation_interval: 15s}
rule_files: ["$repo/deploy/prometheus/alerts.yml"]
scrape_configs:
  - {job_name: cairn-api, static_configs: [{targets: ["127.0.0.1:$API_METRICS_PORT"]}]}
  - {job_name: cairn-worker, static_configs: [{targets: ["127.0.0.1:$WORKER_METRICS_PORT"]}]}
  - {job_name: cairn-scheduler, static_configs: [{targets: ["127.0.0.1:$SCHEDULER_METRICS_PORT"]}]}
YAML
    promtool check config "$dir/prometheus.yml" >/dev/null
    pid_alive "$state/run/prometheus.pid" || require_free_port "$PROMETHEUS_PORT" prometheus CAIRN_PROMETHEUS_PORT
    run_cairn prometheus prometheus --config.file="$dir/prometheus.yml" \
        --storage.tsdb.path="$dir/data" --web.listen-address="127.0.0.1:$PROMETHEUS_PORT"
    wait_for 30 prometheus curl -sf "http://127.0.0.1:$PROMETHEUS_PORT/-/ready"
    echo "prometheus: up (http://127.0.0.1:$PROMETHEUS_PORT)"
}
prometheus_down() {
    if pid_alive "$state/run/prometheus.pid"; then
        stop_pidfile "$state/run/prometheus.pid" prometheus
        echo "prometheus: stopped"
    fi
    rm -f "$state/run/prometheus.conf"
}

cairn_down() {
    for name in cairn-files cairn-scheduler cairn-worker cairn-api; do
        stop_pidfile "$state/run/$name.pid" "$name"
        rm -f "$state/run/$name.conf"
        echo "$name: stopped"
    done
}

status_line() {
    local label=$1; shift
    if "$@" >/dev/null 2>&1; then echo "$label: up"; else echo "$label: down"; fi
}

case "$cmd" in
    up)
        redis_up
        pg_up
        "$here/ceph.sh" start ceph-a "$CEPH_A_PORT"
        if [ "$second" = 1 ]; then "$here/ceph.sh" start ceph-b "$CEPH_B_PORT"; fi
        if [ "$rgw" = 1 ]; then "$here/rgw.sh" start ceph-a "$RGW_PORT"
        elif pid_alive "$state/rgw-ceph-a/radosgw.pid"; then "$here/rgw.sh" stop ceph-a "$RGW_PORT"; fi
        if [ "$openstack" = 1 ]; then
            "$here/openstack.sh" up
            "$venv/bin/python" "$here/openstack_seed.py" cairn --password "$cairn_password"
        fi
        if [ "$scope" = all ]; then
            cairn_up
            if [ "$prometheus" = 1 ]; then prometheus_up; else prometheus_down; fi
        fi
        ;;
    down)
        prometheus_down
        cairn_down
        if [ -d "$state/openstack" ]; then "$here/openstack.sh" down; fi
        "$here/rgw.sh" stop ceph-a "$RGW_PORT"
        "$here/ceph.sh" stop ceph-b "$CEPH_B_PORT"
        "$here/ceph.sh" stop ceph-a "$CEPH_A_PORT"
        pg_down
        stop_pidfile "$redis_pid" redis; echo "redis: stopped"
        ;;
    status)
        status_line "redis (127.0.0.1:$REDIS_PORT)" pid_alive "$redis_pid"
        status_line "postgres (127.0.0.1:$PG_PORT)" as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" status
        "$here/ceph.sh" status ceph-a "$CEPH_A_PORT" || true
        "$here/ceph.sh" status ceph-b "$CEPH_B_PORT" || true
        "$here/rgw.sh" status ceph-a "$RGW_PORT" || true
        if [ -d "$state/openstack" ]; then "$here/openstack.sh" status; fi
        for name in cairn-api cairn-worker cairn-scheduler cairn-files prometheus; do
            status_line "$name" pid_alive "$state/run/$name.pid"
        done
        ;;
    *) echo "usage: stack.sh up|down|status [infra|all]" >&2; exit 2 ;;
esac
