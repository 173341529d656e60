#!/usr/bin/env bash
# Installs the real mDNS peers the lab tests run inside network namespaces: avahi-daemon and its tools, a
# D-Bus daemon for their private buses, and dig; Prometheus, which scrapes the metrics endpoint in its lab test
# (and whose promtool checks the exposition); and what the package's boot test boots a Debian system with
# (debootstrap, systemd-nspawn); Chromium, tidy and node for the page's tests; Podman for the container image's.
# Idempotent; run as root (CI does).
#
# Package scripts must not start daemons in the machine's own namespace: a temporary policy-rc.d that exits
# 101 stops invoke-rc.d, and any avahi-daemon or dbus-daemon that appears anyway (a systemd unit, socket
# activation) is stopped and disabled afterwards. Daemons that were running before are left alone.
set -euo pipefail

packages=(
    avahi-daemon     # mDNS responder run per lab host
    avahi-utils      # avahi-browse, avahi-resolve, avahi-publish
    dbus-daemon      # the private system bus each lab avahi-daemon talks to its tools over
    bind9-dnsutils   # dig: legacy-unicast queries to port 5353
    python3          # the multicast query helper
    debootstrap      # the boot test's Debian 12 root (scripts/make-boot-root.sh)
    systemd-container # systemd-nspawn: the boot test boots that root under systemd
    prometheus       # a real Prometheus for the metrics lab test; promtool for the exposition's unit test
    chromium         # a real browser, headless, for the page's lab test
    tidy             # the page's HTML checked by a validator
    nodejs           # the page's script parsed (node --check)
    podman           # the container image's test: built and run as users run it
    runc             # the runtime podman uses on the test machines (crun refuses their hybrid cgroups)
    containernetworking-plugins # podman's bridge network, on which the image must refuse to start
    iptables         # the NAT of that bridge network
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
    echo "install-mdns-test-tools: missing Debian packages: ${missing[*]}" >&2
    echo "install-mdns-test-tools: run as root, or: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi

daemon_pids() {
    # The exact process names; never a pattern over command lines.
    pgrep -x avahi-daemon || true
    pgrep -x dbus-daemon || true
    pgrep -x prometheus || true
}
before=$(daemon_pids | sort)

policy=/usr/sbin/policy-rc.d
saved_policy=""
if [[ -e $policy ]]; then
    saved_policy=$(mktemp)
    cp -p "$policy" "$saved_policy"
fi
restore_policy() {
    if [[ -n $saved_policy ]]; then
        cp -p "$saved_policy" "$policy"
        rm -f "$saved_policy"
    else
        rm -f "$policy"
    fi
}
trap restore_policy EXIT
printf '#!/bin/sh\n# Installed by install-mdns-test-tools.sh while it runs: start no services.\nexit 101\n' >"$policy"
chmod 0755 "$policy"

echo "install-mdns-test-tools: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# No recommends: libnss-mdns would change name resolution of the machine itself.
apt-get install -y -qq --no-install-recommends "${missing[@]}"

# Under systemd, the avahi and prometheus units were enabled (avahi may be socket-activated) regardless of
# policy-rc.d. Only a freshly installed one is disabled; one that was there before keeps its configuration.
for service in avahi-daemon prometheus; do
    if [[ " ${missing[*]} " == *" $service "* ]]; then
        if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; then
            systemctl disable --now "$service.service" >/dev/null 2>&1 || true
            if [[ $service == avahi-daemon ]]; then
                systemctl disable --now avahi-daemon.socket >/dev/null 2>&1 || true
            fi
        fi
        if [[ -x /etc/init.d/$service ]] && command -v update-rc.d >/dev/null; then
            update-rc.d "$service" disable >/dev/null 2>&1 || true
        fi
    fi
done

# Stop, by pid, any avahi-daemon, dbus-daemon or prometheus that appeared during the installation in this network namespace
# (those of lab namespaces belong to running tests).
own_namespace=$(readlink /proc/self/ns/net)
after=$(daemon_pids | sort)
for pid in $(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after")); do
    [[ -n $pid ]] || continue
    [[ $(readlink "/proc/$pid/ns/net" 2>/dev/null) == "$own_namespace" ]] || continue
    echo "install-mdns-test-tools: stopping $(cat "/proc/$pid/comm" 2>/dev/null || echo process) $pid started by the installation"
    kill -TERM "$pid" 2>/dev/null || true
done
