#!/usr/bin/env bash
# Installs the Debian packages that building and testing sleepproxy need, when any is missing.
# The Swift toolchain itself (6.0 or later) must already be on PATH.
set -euo pipefail

packages=(
    libpcap-dev      # the CPcap target (libpcap + pkg-config file)
    libsqlite3-dev   # the CSQLite target: the lease store
    pkgconf          # resolves libpcap for SwiftPM
    iproute2         # `ip`: the test lab's namespaces, veths and bridge
    iputils-arping   # lab tests: ARP from a namespace
    iputils-ping     # lab tests: reachability
    netcat-openbsd   # lab tests: TCP SYNs
    python3          # fuzz corpus seeding; UDP clients in lab tests
    systemd          # systemd-analyze, systemd-sysusers: the unit check (systemd need not be PID 1)
    man-db           # man: the install check renders the manual pages and fails on any warning
)

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done

if ((${#missing[@]} == 0)); then
    exit 0
fi
if ((EUID != 0)); then
    echo "install-deps: missing Debian packages: ${missing[*]}" >&2
    echo "install-deps: run as root (sudo make ...) or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
