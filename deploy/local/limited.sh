# `limited`: a command ended, with its Python processes' stacks printed, once it outlives a
# limit (sourced by test.sh; tests/unit/deploy/test_limited.py runs it).

# descendants PID: every process below PID.
descendants() {
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$child"
        descendants "$child"
    done
}

# pythons PID...: those of the PIDs that are Python (pytest, its xdist workers, the stack's
# Cairn processes): bash would die of SIGUSR1 instead of ignoring it.
pythons() {
    local pid
    for pid in "$@"; do
        case "$(ps -o comm= -p "$pid" 2>/dev/null)" in python*) echo "$pid" ;; esac
    done
}

# limited SECONDS CMD...: run a tier, ended if it outlives SECONDS. The watchdog
# (tests/support/watchdog.py) ends a blocked test; this ends whatever it cannot see (the
# xdist controller waiting on a worker, a fixture outside any test), so a stuck run fails
# here with every pytest process's stacks (SIGUSR1, see the watchdog) instead of at CI's
# limit with nothing said.
limited() {
    local limit=$1; shift
    "$@" &
    local child=$! rc=0
    (
        # The wait holds none of the run's output: were it orphaned (the guard ended in the
        # instant between forking it and anything that could name it), it could not keep
        # whoever reads the run's output waiting for the whole limit.
        sleep "$limit" </dev/null >/dev/null 2>&1
        echo
        echo "=== this tier still runs after $limit s: the stacks of its Python processes follow, then it is ended"
        pids="$child $(descendants "$child")"
        # shellcheck disable=SC2086
        kill -USR1 $(pythons $pids) 2>/dev/null || true
        sleep "${CAIRN_LIMITED_DUMP_SECONDS:-5}"
        # shellcheck disable=SC2086
        kill -TERM $(pythons $pids) 2>/dev/null || true
        sleep "${CAIRN_LIMITED_TERM_SECONDS:-10}"
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
    ) &
    local guard=$!
    wait "$child" || rc=$?
    # shellcheck disable=SC2046
    kill $(descendants "$guard") "$guard" 2>/dev/null || true
    wait "$guard" 2>/dev/null || true
    return "$rc"
}
