#!/usr/bin/env bash
# Builds the web portal into portal/dist (cairn-api serves it at /): its npm packages from
# the committed lock file (only when the lock changed), the typed client from the API's
# OpenAPI document, then Vite's build. Node is the one bootstrap.sh put in the venv.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${CAIRN_VENV:-$repo/.venv}
export PATH="$venv/bin:$PATH"
cd "$repo/portal"

stamp="node_modules/.cairn-lock-$(sha256sum package-lock.json | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "portal: installing npm packages (package-lock.json)"
    npm ci --no-audit --no-fund --loglevel=error
    touch "$stamp"
fi
"$venv/bin/python" -m api.openapi_dump src/api/openapi.json
npm run --silent types >/dev/null
npm run --silent build >/dev/null
echo "portal: built into portal/dist"
