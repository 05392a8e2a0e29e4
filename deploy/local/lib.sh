# Shared helpers for the local stack scripts (sourced, not run).

# A step that fails under `set -e` names itself: several daemons report only into their
# own log files, and a start that stops without a word cannot be diagnosed from CI output.
set -E
trap 'cairn_rc=$?; echo "${0##*/}: line $LINENO: \"$BASH_COMMAND\" failed (exit $cairn_rc)" >&2' ERR

# pid_alive PIDFILE: true when the file names a running process.
pid_alive() {
    local pid
    [ -f "$1" ] || return 1
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# stop_pidfile PIDFILE LABEL: TERM the process the file names, KILL it after 20 s.
# Processes are stopped by PID, never by name, so other stacks on the machine survive.
stop_pidfile() {
    local file=$1 label=$2 pid i
    pid_alive "$file" || { rm -f "$file"; return 0; }
    pid=$(cat "$file")
    kill "$pid" 2>/dev/null || true
    for i in $(seq 1 200); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "$label: did not stop in 20 s, killing" >&2
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
}

# quietly CMD...: run CMD without its chatter, but show everything it said if it fails.
quietly() {
    local out rc=0
    out=$("$@" 2>&1) || rc=$?
    if [ "$rc" -ne 0 ]; then printf '%s\n' "$out" >&2; fi
    return "$rc"
}

# wait_for SECONDS LABEL CMD...: retry CMD until it succeeds or time runs out.
wait_for() {
    local seconds=$1 label=$2 deadline
    shift 2
    deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "$label: not ready after ${seconds} s" >&2
            return 1
        fi
        sleep 0.3
    done
}

# require_free_port PORT LABEL VARIABLE: refuse to start where another server listens, so
# the stack never talks to someone else's Redis, PostgreSQL or Ceph by mistake.
require_free_port() {
    local low high
    read -r low high </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=0 high=0
    if [ "$1" -ge "$low" ] && [ "$1" -le "$high" ]; then
        echo "$2: warning: port $1 lies in the ephemeral range $low-$high; an outgoing" \
             "connection may hold it at random and the server then fails to bind" >&2
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
        echo "$2: port $1 is already in use by another process; stop it or choose another" \
             "port with $3" >&2
        return 1
    fi
}
