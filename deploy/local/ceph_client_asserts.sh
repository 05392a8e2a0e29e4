# An assertion librados or librbd failed in a test or a Cairn process ends that process
# with only "Aborted" on the terminal (pytest holds its stderr); Ceph writes the assertion
# itself to the clients' log. test.sh marks where those logs end before the run and prints
# what the run added that matters (sourced by test.sh, under set -euo pipefail;
# tests/unit/deploy/test_ceph_client_asserts.py runs it).

CEPH_CLIENT_TROUBLE="FAILED ceph_assert|Caught signal|terminate called"

# ceph_client_logs_mark STATE FILE: each client log's path and size, a line each.
ceph_client_logs_mark() {
    local log
    for log in "$1"/ceph-*/log/client.*.log; do
        if [ -f "$log" ]; then echo "$log $(stat -c %s "$log")"; fi
    done >"$2"
}

# ceph_client_asserts STATE FILE: print what each client log gained since FILE's mark (a
# log not marked, e.g. made by the run's own clusters, from its start) if it holds trouble.
ceph_client_asserts() {
    local log offset found=0
    for log in "$1"/ceph-*/log/client.*.log; do
        [ -f "$log" ] || continue
        offset=$(awk -v path="$log" '$1 == path { print $2 }' "$2" 2>/dev/null || true)
        # A log that shrank since the mark was made anew: all of it is this run's.
        [ "$(stat -c %s "$log")" -ge "${offset:-0}" ] || offset=0
        if tail -c "+$(( ${offset:-0} + 1 ))" "$log" | grep -E "$CEPH_CLIENT_TROUBLE" >/dev/null; then
            [ "$found" = 1 ] || echo "=== a Ceph client failed an assertion or was aborted (from its log)"
            found=1
            echo "--- $log"
            tail -c "+$(( ${offset:-0} + 1 ))" "$log" \
                | grep -E -B 2 -A 25 "$CEPH_CLIENT_TROUBLE" | tail -n 120 || true
        fi
    done
    return 0
}
