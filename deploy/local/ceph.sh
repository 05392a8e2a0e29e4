#!/usr/bin/env bash
# A single-node micro Ceph cluster for development and tests: one mon, one OSD,
# auth none, pool size 1, loopback only. Several independent clusters can run side by
# side (own name, data dir and mon port), e.g. a second one as a cross-cluster target.
#
#   ceph.sh start|stop|status NAME PORT
#
# Environment: CAIRN_STATE_DIR (default: <repo>/.state), CEPH_OBJECTSTORE (memstore |
# bluestore, default memstore), CEPH_STORE_BYTES (cap of the OSD store, default 4 GiB),
# CEPH_POOLS (default "volumes backups"), CEPH_PAXOS_PROPOSE_INTERVAL (default 0.1 s).
set -euo pipefail

cmd=${1:?usage: ceph.sh start|stop|status NAME PORT}
name=${2:?cluster name}
port=${3:?mon port}
here=$(cd "$(dirname "$0")" && pwd)
state=${CAIRN_STATE_DIR:-$(cd "$here/../.." && pwd)/.state}
dir="$state/$name"
conf="$dir/ceph.conf"
objectstore=${CEPH_OBJECTSTORE:-memstore}
store_bytes=${CEPH_STORE_BYTES:-4294967296}
pools=${CEPH_POOLS:-volumes backups}
propose_interval=${CEPH_PAXOS_PROPOSE_INTERVAL:-0.1}

. "$here/lib.sh"

write_conf() {
    local fsid=$1
    cat >"$conf" <<CONF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$port
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
mon data = $dir/mon
osd data = $dir/osd
osd objectstore = $objectstore
memstore device bytes = $store_bytes
# Outside the OSD dir: BlueStore puts its own "block" symlink there.
bluestore block path = $dir/bluestore.block
bluestore block size = $store_bytes
bluestore block create = true
# Snapshot creation waits for the mon's next proposal; Ceph's 1 s default would cost every
# backup ~2 s on a one-node dev cluster. The benchmarks set 1 (production's value): the copy
# engine's when it makes its cluster, the fleet's at run time (ceph tell mon.a config set).
paxos propose interval = $propose_interval
# A file-backed OSD counts as rotational, where snapshot trimming sleeps 5 s per step:
# space held by removed snapshots would then come back far slower than tests remove them.
# (0 in osd_snap_trim_sleep means "use the per-device value", hence all three.)
osd snap trim sleep hdd = 0
osd snap trim sleep ssd = 0
osd snap trim sleep hybrid = 0
osd max object name len = 460
osd max object namespace len = 64
osd op num shards = 2
osd op num threads per shard = 2
osd memory target = 939524096
bluestore cache autotune = false
bluestore cache size = 268435456

[client]
# No admin socket for clients. Every test, Cairn process and ceph CLI call is client.admin:
# each new connection found the one socket path taken, pinged the process that held it
# and logged "File exists" (thousands of cross-process pings a test run), and nothing here
# uses a client's admin socket. The daemons keep theirs.
admin socket =
CONF
}

ceph_cli() { timeout 30 ceph -c "$conf" "$@"; }

healthy() {
    [ -f "$conf" ] && pid_alive "$dir/run/mon.a.pid" && pid_alive "$dir/run/osd.0.pid" \
        && ceph_cli osd stat -f json 2>/dev/null | grep -q '"num_up_osds":1'
}

# What the cluster on disk was made with (its conf says): a start that asks for another
# object store or size makes the cluster anew. Without this, a memstore cluster restarted
# for a BlueStore benchmark came back as an empty memstore OSD under a mon that remembered
# its pools, and every client hung.
made_as_requested() {
    [ -f "$conf" ] \
        && [ "$(sed -n 's/^osd objectstore = //p' "$conf")" = "$objectstore" ] \
        && [ "$(sed -n 's/^bluestore block size = //p' "$conf")" = "$store_bytes" ]
}

start() {
    if healthy && ! made_as_requested; then
        echo "ceph $name: running as $(sed -n 's/^osd objectstore = //p' "$conf"); made anew as $objectstore"
        stop_daemons
    fi
    if healthy; then
        echo "ceph $name: already running (mon 127.0.0.1:$port, conf $conf)"
        return 0
    fi
    mkdir -p "$dir/run" "$dir/log"
    pid_alive "$dir/run/mon.a.pid" || require_free_port "$port" "ceph $name mon" "the port argument"
    if [ ! -f "$dir/mon/store.db/CURRENT" ] || [ "$objectstore" = memstore ] \
            || ! made_as_requested; then
        # memstore loses its data when the OSD stops, so the cluster is made anew each
        # start: a mon that remembers pools whose PGs are gone would hang every client.
        stop_daemons
        rm -rf "$dir/mon" "$dir/osd" "$dir/bluestore.block"
        mkdir -p "$dir/mon" "$dir/osd"
        local fsid; fsid=$(cat /proc/sys/kernel/random/uuid)
        write_conf "$fsid"
        monmaptool --create --clobber --fsid "$fsid" --addv a "[v2:127.0.0.1:$port]" "$dir/monmap" >/dev/null
        ceph-authtool --create-keyring "$dir/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
        ceph-mon -c "$conf" -i a --mkfs --monmap "$dir/monmap" --keyring "$dir/mon.keyring"
        fresh=1
    else
        fresh=0
    fi
    pid_alive "$dir/run/mon.a.pid" || ceph-mon -c "$conf" -i a 2>>"$dir/log/mon-start.log" \
        || { tail -n 5 "$dir/log/mon-start.log" >&2; return 1; }
    wait_for 30 "ceph $name mon" ceph_cli mon stat
    if [ "$fresh" = 1 ]; then
        local uuid; uuid=$(cat /proc/sys/kernel/random/uuid)
        ceph_cli osd new "$uuid" >/dev/null
        ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$uuid" 2>"$dir/log/osd-mkfs.log" \
            || { cat "$dir/log/osd-mkfs.log" >&2; return 1; }
    fi
    pid_alive "$dir/run/osd.0.pid" || ceph-osd -c "$conf" -i 0 2>>"$dir/log/osd-start.log" \
        || { tail -n 5 "$dir/log/osd-start.log" >&2; return 1; }
    wait_for 60 "ceph $name osd" sh -c "timeout 10 ceph -c '$conf' osd stat -f json | grep -q '\"num_up_osds\":1'"
    for pool in $pools; do
        if ! ceph_cli osd pool ls | grep -qx "$pool"; then
            quietly ceph_cli osd pool create "$pool" 16 16
            quietly ceph_cli osd pool set "$pool" size 1 --yes-i-really-mean-it
            quietly ceph_cli osd pool application enable "$pool" rbd
            timeout 30 rbd -c "$conf" pool init "$pool"
        fi
    done
    echo "ceph $name: up (mon 127.0.0.1:$port, conf $conf, pools: $pools)"
}

stop_daemons() {
    stop_pidfile "$dir/run/osd.0.pid" "ceph $name osd"
    stop_pidfile "$dir/run/mon.a.pid" "ceph $name mon"
}

case "$cmd" in
    start) start ;;
    stop) stop_daemons; echo "ceph $name: stopped" ;;
    status)
        if healthy; then echo "ceph $name: up (mon 127.0.0.1:$port, conf $conf)"
        else echo "ceph $name: down"; exit 1; fi ;;
    *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
