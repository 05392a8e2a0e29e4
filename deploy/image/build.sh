#!/usr/bin/env bash
# Builds the one Cairn image (Containerfile) on this machine, without a registry: the
# Debian 12 base comes from debootstrap (Debian's mirror), buildah builds on it with the
# vfs storage driver and chroot isolation (no daemon, no overlay, no user namespaces).
#
#   deploy/image/build.sh [TAG]        (default localhost/cairn:dev)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tag=${1:-localhost/cairn:dev}
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
base=docker.io/library/debian:12-slim

if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    echo "image: debootstrap of Debian 12 (minbase) as $base"
    debootstrap --variant=minbase --include=ca-certificates bookworm "$root" \
        "${CAIRN_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$root.log" 2>&1 \
        || { tail -20 "$root.log" >&2; exit 1; }
    ctr=$(buildah from scratch)
    mnt=$(buildah mount "$ctr")
    cp -a "$root"/. "$mnt"/
    buildah umount "$ctr" >/dev/null
    buildah commit -q "$ctr" "$base" >/dev/null
    buildah rm "$ctr" >/dev/null
fi

# The build's RUN steps trust what the host trusts (a TLS-inspecting proxy's CA included),
# without baking the host's bundle into the image.
echo "image: building $tag"
before=$(buildah inspect --type image --format '{{.FromImageID}}' "$tag" 2>/dev/null || true)
buildah bud --pull=never --network host --layers=false \
    -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
    -f "$repo/Containerfile" -t "$tag" "$repo"
# The tag moved to the new image; the one it named is left with no name. With the vfs
# driver each is a whole copy (about 1 GB): every `make test` kept one more until the disk
# filled. It goes, unless a container still uses it.
after=$(buildah inspect --type image --format '{{.FromImageID}}' "$tag")
if [ -n "$before" ] && [ "$before" != "$after" ]; then
    buildah rmi "$before" >/dev/null 2>&1 || true
fi
