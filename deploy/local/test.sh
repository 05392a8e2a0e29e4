#!/usr/bin/env bash
# `make test` and `make test-only`: every check and test tier, with what does not depend on
# another step running beside it, and the time of each step, the ten slowest tests and the
# whole run printed at the end.
#
#   test.sh all               bootstrap, the stack's servers, then everything (make test)
#   test.sh only [ARGS...]    against servers already running (make test-only): with
#                             ARGS, just `pytest ARGS` (one file in seconds); without,
#                             the unit, tools and integration tiers as `make test` runs them
#
# The order, for `all` (a step in [brackets] runs in the background beside the others):
#   bootstrap -> [servers] [lint and types] [unit tier] [portal build, its unit tests,
#   then the tools tier] -> integration tier in parallel (pytest-xdist, WORKERS workers)
#   once the servers and the portal are ready -> its serial tests, alone -> the rest's end
#   -> `make up` and a newcomer's first ten minutes in the browser on it (tests/system/),
#   which leaves make up's default stack running.
# A step's output is printed in one piece when it ends. A failed check or tier does not
# stop the others (one run answers everything); failed servers or portal stop the run.
#
# Environment: COVERAGE=1 (line coverage of api/ services/ worker/ over every tier, the
# stack's subprocesses included), WORKERS (default 3), CAIRN_STATE_DIR, CAIRN_TEST_RUN_DIR
# (each step's log and JUnit XML; default $CAIRN_STATE_DIR/test-run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
state=${CAIRN_STATE_DIR:-$repo/.state}
venv=${CAIRN_VENV:-$repo/.venv}
. "$here/lib.sh"
. "$here/limited.sh"
. "$here/ceph_client_asserts.sh"

mode=${1:-all}
shift || true
workers=${WORKERS:-3}
coverage=${COVERAGE:-0}
run=${CAIRN_TEST_RUN_DIR:-$state/test-run}
cd "$repo"

now() { date +%s.%N; }
run_start=$(now)
declare -A pid=() began=()
times=()
failed=()

seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }

# pytest NAME ARGS...: the tier's pytest, its results kept for the summary, under coverage
# when asked (each process writes its own data file; they are combined at the end).
pytest_() {
    local name=$1; shift
    local python=("$venv/bin/python")
    [ "$coverage" = 1 ] && python+=(-m coverage run)
    CAIRN_TEST_WATCHDOG_ENDED="$run/watchdog-ended" \
        "${python[@]}" -m pytest -p no:cacheprovider --junitxml="$run/$name.xml" "$@"
}

# again_after_abort NAME STATUS: a tier's status, after running once more, alone, the tests
# that a process abort failed (librbd's, docs/operations.md; tests/support/reruns.py says
# which count). Said loudly: each is a real abort of a real process, just not a verdict
# on Cairn's code.
again_after_abort() {
    local name=$1 rc=$2 tests
    [ "$rc" = 0 ] || [ ! -f "$run/$name.xml" ] && return "$rc"
    mapfile -t tests < <("$venv/bin/python" -m tests.support.reruns "$run/$name.xml" \
        "$run/watchdog-ended")
    [ "${#tests[@]}" -gt 0 ] || return "$rc"
    echo "=== $name: ${#tests[@]} test(s) failed by a process abort; running them once more"
    printf '  %s\n' "${tests[@]}"
    limited "$SERIAL_LIMIT" pytest_ "$name-again" -q -n 1 "${tests[@]}"
}

# foreground NAME CMD...: run a step here, timed; its failure is recorded.
foreground() {
    local name=$1 start rc=0; shift
    start=$(now)
    echo "=== $name"
    "$@" || rc=$?
    times+=("$name|$(seconds_since "$start")|$rc")
    [ "$rc" = 0 ] || failed+=("$name")
    return "$rc"
}

# background NAME CMD...: start a step beside the others, its output in its own log.
background() {
    local name=$1; shift
    began[$name]=$(now)
    rm -f "$run/$name.status"
    # The step writes its own exit status, which `finish` believes over `wait`'s: a step
    # finished early (check, unit) is waited for many minutes later, and by then its pid
    # may have been reused by another child of this shell (pid_max 32768 wraps within a
    # run), which drops the status bash kept for it: `wait` answers 127, "not a child"
    # (runs 25, 27 and 28, each for a step whose every command had succeeded).
    # (A trap, not `"$@" || rc=$?`: that would turn errexit off inside the step, and a
    # check whose ruff failed would pass on mypy's status.)
    ( trap "echo \$? >'$run/$name.status'" EXIT; "$@" ) >"$run/$name.log" 2>&1 &
    pid[$name]=$!
}

# finish NAME: wait for a background step, then print its output and time.
finish() {
    local name=$1 rc=0
    wait "${pid[$name]}" || rc=$?
    if [ -s "$run/$name.status" ]; then
        rc=$(<"$run/$name.status")
    fi
    local took; took=$(seconds_since "${began[$name]}")
    echo "=== $name ($took s$([ "$rc" = 0 ] || echo ", FAILED with status $rc"))"
    cat "$run/$name.log"
    times+=("$name|$took|$rc")
    [ "$rc" = 0 ] || failed+=("$name")
    return "$rc"
}

check() {
    "$venv/bin/ruff" check .
    "$venv/bin/lint-imports" --no-cache
    "$venv/bin/mypy"
}

portal() {
    bash "$here/portal.sh"
    (cd portal && PATH="$venv/bin:$PATH" npm test --silent)
}

# How pytest-xdist hands out the integration tests. `load`, not `loadgroup`: with pytest
# 9.2 loadgroup's grouping silently does nothing (pytest-xdist#1386), and its scheduler
# (loadscope's) hangs the whole run once a worker dies (the watchdog's way of ending a
# test blocked in C): it queues the dead worker's finished tests again, which never
# report. Tests that must not overlap take a lock instead (tests/integration/conftest.py).
XDIST_DIST=load
# How long a tier may run before it is ended with its stacks printed (limited.sh): far
# above what each takes on CI's two cores (integration ~10 min, serial ~3, the tiers beside
# them ~12 while they share the cores), and together under CI's 90 minutes.
TIER_LIMIT=${CAIRN_TEST_TIER_LIMIT:-2700}
SERIAL_LIMIT=${CAIRN_TEST_SERIAL_LIMIT:-1200}

integration() {
    # The parallel phase: most tests wait (on the mon's proposals, Keystone, Cinder, a
    # worker's poll), so more workers than cores pay.
    local rc=0
    limited "$TIER_LIMIT" \
        pytest_ integration -q -n "$workers" --dist "$XDIST_DIST" -m "not serial" tests/integration \
        || rc=$?
    again_after_abort integration "$rc"
}

serial() {
    # Tests that need the machine to themselves (timings they assert, a shared server they
    # pause), after the parallel phase, alone. On one xdist worker, so a test the watchdog
    # ends (tests/support/watchdog.py) is reported and the rest still run.
    local rc=0
    limited "$SERIAL_LIMIT" pytest_ serial -q -n 1 -m serial tests/integration || rc=$?
    [ "$rc" = 5 ] && rc=0  # none selected (e.g. no serial test in ARGS' files)
    again_after_abort serial "$rc"
}

make_up() {
    # Last, alone: `make up` changes the stack into its default one (tests/system/), which
    # the tiers above would miss; it stays up afterwards, as it would for a newcomer.
    CAIRN_MAKE_UP_TEST=1 limited "$SERIAL_LIMIT" pytest_ make-up -q tests/system
}

summary() {
    ceph_client_asserts "$state" "$run/ceph-client-logs"
    echo
    echo "=== where the time went"
    local entry name took rc
    for entry in "${times[@]}"; do
        IFS='|' read -r name took rc <<<"$entry"
        printf '  %-13s %5s s%s\n' "$name" "$took" "$([ "$rc" = 0 ] || echo "  FAILED")"
    done
    if compgen -G "$run/*.xml" >/dev/null; then
        echo "=== the ten slowest tests (setup, call and teardown)"
        "$venv/bin/python" -m tests.support.slowest 10 "$run"/*.xml
        local broken; broken=$("$venv/bin/python" -m tests.support.failures "$run"/*.xml)
        [ -z "$broken" ] || printf '=== the tests that failed\n%s\n' "$broken"
    fi
    if [ "$coverage" = 1 ]; then
        "$venv/bin/python" -m coverage combine -q
        echo "=== line coverage of api/ services/ worker/ (every tier, subprocesses included)"
        "$venv/bin/python" -m coverage report | grep '^TOTAL'
    fi
    local total; total=$(seconds_since "$run_start")
    printf '=== total: %d min %02d s (WORKERS=%s)\n' $((total / 60)) $((total % 60)) "$workers"
    if [ "${#failed[@]}" -gt 0 ]; then
        echo "=== FAILED: ${failed[*]}"
        exit 1
    fi
}

prepare() {
    rm -rf "$run"
    mkdir -p "$run"
    ceph_client_logs_mark "$state" "$run/ceph-client-logs"
    if [ "$coverage" = 1 ]; then
        # Every process measured (xdist workers, the stack's subprocesses) writes a file
        # of its own there (pyproject.toml: parallel); `summary` combines them.
        export COVERAGE_FILE=${COVERAGE_FILE:-$state/coverage/data}
        rm -rf "$(dirname "$COVERAGE_FILE")" && mkdir -p "$(dirname "$COVERAGE_FILE")"
    fi
}

case "$mode" in
    all)
        foreground bootstrap env CAIRN_OPENSTACK=1 CAIRN_PROMETHEUS=1 CAIRN_HELM=1 \
            CAIRN_IMAGE=1 CAIRN_RGW=1 CAIRN_PORTAL_TESTS=1 bash "$here/bootstrap.sh"
        prepare
        background servers env CAIRN_SECOND_CLUSTER=1 CAIRN_OPENSTACK=1 CAIRN_RGW=1 \
            bash "$here/stack.sh" up infra
        background check limited "$TIER_LIMIT" check
        background unit limited "$TIER_LIMIT" pytest_ unit -q tests/unit
        # The tools tier builds the image, which holds the portal: after the portal's build.
        background portal portal
        finish portal || { summary; exit 1; }  # summary exits 1: portal failed
        background tools limited "$TIER_LIMIT" pytest_ tools -q tests/tools
        finish servers || { summary; exit 1; }
        foreground integration integration || true
        foreground serial serial || true
        finish check || true
        finish unit || true
        finish tools || true
        foreground make-up make_up || true
        summary
        ;;
    only)
        prepare
        if [ "$#" -gt 0 ]; then
            foreground pytest pytest_ pytest "$@" || true
        else
            background unit limited "$TIER_LIMIT" pytest_ unit -q tests/unit
            background tools limited "$TIER_LIMIT" pytest_ tools -q tests/tools
            foreground integration integration || true
            foreground serial serial || true
            finish unit || true
            finish tools || true
        fi
        summary
        ;;
    *) echo "usage: test.sh all | only [PYTEST ARGS...]" >&2; exit 2 ;;
esac
