#!/usr/bin/env bash
# Installs the exact npm packages of package-lock.json into tests/interop/js/node_modules,
# for the JavaScript interop tests (tests/interop/test_js_*.py). Nothing is installed
# globally. Without Node the test skips itself, so this script does too.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v npm >/dev/null 2>&1; then
    echo "npm not found: skipping the JavaScript interop install" >&2
    exit 0
fi
npm ci --prefix "$here" --no-audit --no-fund --loglevel=error
