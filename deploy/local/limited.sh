# `limited`: a command ended, with the stacks of its Python processes printed, once it
# outlives a limit (sourced by test.sh; tests/tools/deploy/test_limited.py runs it).

# descendants PID: every process below PID.
descendants() {
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$child"
        descendants "$child"
    done
}

# named PATTERN PID...: those of the PIDs whose process name matches the glob PATTERN.
named() {
    local pattern=$1 pid; shift
    for pid in "$@"; do
        # shellcheck disable=SC2254
        case "$(ps -o comm= -p "$pid" 2>/dev/null)" in $pattern) echo "$pid" ;; esac
    done
}

# running PID: true while PID is a process that has not ended (a zombie has).
running() {
    local stat
    stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [ -n "$stat" ] && [ "${stat:0:1}" != Z ]
}

# end_tier PID LIMIT: every thread's stack of the tier's Python processes, then the tier
# and everything below it ended.
end_tier() {
    local child=$1 limit=$2 pids
    echo
    echo "=== this tier still runs after $limit s: the stacks of its Python processes follow, then it is ended"
    pids="$child $(descendants "$child")"
    # pytest and its xdist workers print their stacks on SIGUSR1 (tests/support/watchdog.py),
    # Cairn's own processes (console scripts: their name is the script's) on SIGUSR2.
    # shellcheck disable=SC2046,SC2086
    kill -USR1 $(named 'python*' $pids) 2>/dev/null || true
    # shellcheck disable=SC2046,SC2086
    kill -USR2 $(named 'cairn-*' $pids) 2>/dev/null || true
    sleep "${CAIRN_LIMITED_DUMP_SECONDS:-5}"
    # Whatever started meanwhile goes too.
    pids="$pids $(descendants "$child")"
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    local waited=0
    while [ "$waited" -lt "${CAIRN_LIMITED_TERM_SECONDS:-10}" ]; do
        # shellcheck disable=SC2086
        [ -n "$(for pid in $pids; do running "$pid" && echo "$pid"; done)" ] || return 0
        sleep 1
        waited=$((waited + 1))
    done
    # shellcheck disable=SC2086
    kill -KILL $pids $(descendants "$child") 2>/dev/null || true
}

# limited SECONDS CMD...: run a tier, ended if it outlives SECONDS; its exit status. The
# watchdog (tests/support/watchdog.py) ends a blocked test; this ends whatever it cannot
# see (the xdist controller waiting on a worker, a fixture outside any test, a tier with no
# test running), so a stuck run fails here with its place named instead of at CI's limit
# with nothing said. This shell watches the clock itself, a second at a time: no guard
# process that could outlive the tier, be ended early by a Ctrl-C, or hold its output.
limited() {
    local limit=$1; shift
    if ! [[ "$limit" =~ ^[0-9]+$ ]]; then
        echo "limited: the limit must be whole seconds, not '$limit'" >&2
        return 2
    fi
    "$@" &
    local child=$! rc=0 start=$SECONDS
    while running "$child"; do
        if [ $((SECONDS - start)) -ge "$limit" ]; then
            end_tier "$child" "$limit"
            break
        fi
        sleep 1
    done
    wait "$child" || rc=$?
    return "$rc"
}
