#!/usr/bin/env bash
# Builds the package and its tests and fails if the compiler warns about any of the project's own files.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! swift build --build-tests "$@" 2>&1 | tee "$log"; then
    exit 1
fi
# Warnings in the project's own sources (dependencies under .build/ are not ours to fix).
if grep -E "warning:" "$log" | grep -v "/\.build/" | grep -q .; then
    echo "check-build: the build has warnings:" >&2
    grep -E "warning:" "$log" | grep -v "/\.build/" | sort -u >&2
    exit 1
fi
echo "check-build: no warnings"
