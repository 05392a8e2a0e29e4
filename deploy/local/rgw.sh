#!/usr/bin/env bash
# A Ceph RGW (S3 endpoint) on a running micro cluster (deploy/local/ceph.sh), on loopback,
# with one S3 user and one bucket for Cairn's object-storage target (issue 18).
#
#   rgw.sh start|stop|status CLUSTER PORT
#
# The user's keys are fixed for the local stack (they guard nothing but loopback) and are
# written, with the endpoint and bucket, to <state>/rgw-CLUSTER/s3.json. Environment:
# CAIRN_STATE_DIR (default <repo>/.state), CAIRN_RGW_BUCKET (default cairn-backups).
set -euo pipefail

cmd=${1:?usage: rgw.sh start|stop|status CLUSTER PORT}
cluster=${2:?cluster name}
port=${3:?port}
here=$(cd "$(dirname "$0")" && pwd)
state=${CAIRN_STATE_DIR:-$(cd "$here/../.." && pwd)/.state}
conf="$state/$cluster/ceph.conf"
dir="$state/rgw-$cluster"
pidfile="$dir/radosgw.pid"
bucket=${CAIRN_RGW_BUCKET:-cairn-backups}
access_key=cairn-local-access
secret_key=cairn-local-secret-not-for-production
endpoint="http://127.0.0.1:$port"

. "$here/lib.sh"

s3() {  # s3 PUT|HEAD PATH: one signed, bodiless request (curl's own SigV4); prints the status
    local method=(-X "$1"); [ "$1" = HEAD ] && method=(-I)
    # S3 wants the payload's hash signed as well, which curl 7.88 does not add by itself:
    # this is the hash of the empty body.
    curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" \
        --user "$access_key:$secret_key" "${method[@]}" \
        -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
        "$endpoint$2"
}

healthy() {
    pid_alive "$pidfile" && [ "$(s3 HEAD "/$bucket")" = 200 ]
}

start() {
    [ -f "$conf" ] || { echo "rgw $cluster: cluster $cluster is not running" >&2; return 1; }
    if pid_alive "$pidfile"; then
        # A cluster made anew (memstore is, at every start) lost the RGW's pools under it.
        if [ "$(cat "$dir/fsid" 2>/dev/null)" = "$(sed -n 's/^fsid = //p' "$conf")" ]; then
            if healthy; then echo "rgw $cluster: already running ($endpoint)"; return 0; fi
        fi
        stop_pidfile "$pidfile" "rgw $cluster"
    fi
    require_free_port "$port" "rgw $cluster" CAIRN_RGW_PORT
    mkdir -p "$dir/data"
    # RGW makes its pools (.rgw.root, default.rgw.*) on first start, at the cluster's
    # default of 32 PGs each: seven of them would pass the one OSD's limit of 250 PGs.
    for option in osd_pool_default_pg_num osd_pool_default_pgp_num; do
        quietly timeout 30 ceph -c "$conf" config set global "$option" 8
    done
    # A daemon asks the mon for an encrypted ("secure") session by default, which a cluster
    # without cephx cannot give: it then retries silently until client_mount_timeout.
    radosgw -c "$conf" -n client.rgw.a --ms-mon-client-mode "crc secure" \
        --client-mount-timeout 30 \
        --rgw-frontends "beast endpoint=127.0.0.1:$port" \
        --rgw-data "$dir/data" --pid-file "$pidfile" --log-file "$dir/radosgw.log" \
        --admin-socket "$dir/radosgw.asok" \
        --rgw-enable-usage-log=false --rgw-dns-name=127.0.0.1 \
        2>>"$dir/start.log" || { tail -n 5 "$dir/start.log" >&2; return 1; }
    wait_for 60 "rgw $cluster" curl -s -o /dev/null "$endpoint"
    if ! radosgw-admin -c "$conf" user info --uid cairn >/dev/null 2>&1; then
        quietly radosgw-admin -c "$conf" user create --uid cairn --display-name "Cairn" \
            --access-key "$access_key" --secret-key "$secret_key"
    fi
    local status
    status=$(s3 PUT "/$bucket")
    case "$status" in
        200|409) ;;
        *) echo "rgw $cluster: creating bucket $bucket answered HTTP $status" >&2; return 1 ;;
    esac
    sed -n 's/^fsid = //p' "$conf" >"$dir/fsid"
    cat >"$dir/s3.json" <<JSON
{"endpoint": "$endpoint", "bucket": "$bucket", "region": "us-east-1",
 "access_key": "$access_key", "secret_key": "$secret_key"}
JSON
    echo "rgw $cluster: up ($endpoint, bucket $bucket, credentials $dir/s3.json)"
}

case "$cmd" in
    start) start ;;
    stop) stop_pidfile "$pidfile" "rgw $cluster"; echo "rgw $cluster: stopped" ;;
    status)
        if healthy; then echo "rgw $cluster: up ($endpoint)"
        else echo "rgw $cluster: down"; exit 1; fi ;;
    *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
