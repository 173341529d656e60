#!/usr/bin/env bash
# `make deb`: builds the Debian packages (sleepproxyd and sleepproxy-client) from this checkout with dpkg-buildpackage (binary only, unsigned), checks
# it with lintian (errors and warnings fail; overrides in debian/*.lintian-overrides say why), and leaves the
# .deb, .buildinfo and .changes in OUT_DIR (default dist/). Prints the package's fields, its files and
# `figure:` lines for its sizes.
#
# As root it first installs what building needs with apt (dpkg-dev, lintian, and the Build-Depends of
# debian/control); otherwise it names what is missing. The Swift toolchain (6.0 or later) must be on PATH: Debian
# has no package of it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-dist}")

if ! command -v swift >/dev/null; then
    echo "build-deb: no Swift toolchain on PATH; install Swift 6 (swift.org) first" >&2
    exit 1
fi

tools_missing() {
    local tool
    for tool in dpkg-buildpackage dpkg-checkbuilddeps lintian; do
        command -v "$tool" >/dev/null || return 0
    done
    ! dpkg-checkbuilddeps >/dev/null 2>&1
}
if tools_missing; then
    if ((EUID != 0)); then
        echo "build-deb: missing build tools or Build-Depends; as root: apt-get install -y dpkg-dev lintian && apt-get build-dep -y ./" >&2
        command -v dpkg-checkbuilddeps >/dev/null && dpkg-checkbuilddeps || true
        exit 1
    fi
    echo "build-deb: installing dpkg-dev, lintian and the Build-Depends of debian/control"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends dpkg-dev lintian
    apt-get build-dep -y -qq ./
fi

version=$(dpkg-parsechangelog -SVersion)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
# The source's files (.buildinfo, .changes) and one .deb per binary package: the server and the client.
base=sleepproxyd_${version}_${arch}
client=sleepproxy-client_${version}_${arch}
# dpkg-buildpackage writes next to the source tree; the files are moved to OUT_DIR afterwards.
parent=$(dirname "$PWD")
rm -f "$parent/$base.deb" "$parent/$client.deb" "$parent/$base.buildinfo" "$parent/$base.changes"
dpkg-buildpackage -b -us -uc
mkdir -p "$out"
for file in "$base.deb" "$client.deb" "$base.buildinfo" "$base.changes"; do
    mv -f "$parent/$file" "$out/$file"
done

# describe DEB FIGURE_PREFIX: fields, files, lintian, sizes.
describe() {
    local deb=$1 prefix=$2
    echo
    echo "build-deb: $deb"
    dpkg-deb --field "$deb" Package Version Architecture Installed-Size Depends Recommends
    echo "build-deb: files:"
    dpkg-deb --contents "$deb" | awk '{ size = $3; $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); printf "%10s %s\n", size, $0 }'
    echo "build-deb: lintian:"
    lintian --fail-on error,warning --display-info --pedantic "$deb" || {
        echo "build-deb: lintian found errors or warnings in $deb" >&2
        exit 1
    }
    echo "build-deb: lintian: no errors or warnings"
    echo "figure: ${prefix}deb_bytes: $(stat -c %s "$deb")"
    echo "figure: ${prefix}installed_size_kib: $(dpkg-deb --field "$deb" Installed-Size)"
}
describe "$out/$base.deb" ""
describe "$out/$client.deb" "client_"
