#!/usr/bin/env bash
# Checks the systemd units and the sysusers file in systemd/:
#   1. `systemd-analyze verify` on each unit: fails on any line it prints (a warning is a failure). The manual
#      pages Documentation= names are not looked up (--man=no): they exist only once installed, and the install
#      check renders them.
#   2. `systemd-analyze security --offline=yes`: prints `figure: systemd-analyze security: N.N` (for the daemon;
#      `... security sleepproxy-client: N.N` for the client) and the settings that still leave exposure, and fails
#      if the overall exposure is above MAX_EXPOSURE (default 2.5).
#   3. `systemd-sysusers` applied to an empty root: the file must create the sleepproxy user and group.
#
# Neither needs systemd to be running (PID 1 may be anything, as in CI containers) nor root.
#
# verify checks that ExecStart= names an executable file, and the programs exist under /usr/local only after
# `make install`. So both checks read a temporary copy of each unit whose Exec lines run /bin/true with the same
# arguments: the check is about the unit's settings, independent of whether (and where) the programs are built or
# installed. Only those lines differ, which the script makes sure of.
set -euo pipefail
cd "$(dirname "$0")/.."

sysusers=systemd/sleepproxy.sysusers
max_exposure=${MAX_EXPOSURE:-2.5}

for tool in systemd-analyze systemd-sysusers; do
    if ! command -v "$tool" >/dev/null; then
        echo "check-unit: $tool is missing; install it: apt-get install -y systemd" >&2
        exit 1
    fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

check_unit() {  # check_unit UNIT INSTALLED_BINARY EXEC_LINES FIGURE_NAME
    local unit=$1 installed_binary=$2 expected=$3 figure=$4 name copy changed status output report exposure
    name=$(basename "$unit")
    copy=$work/$name
    sed -E "s|^(Exec[A-Za-z]*=)$installed_binary([[:space:]])|\\1/bin/true\\2|" "$unit" >"$copy"
    changed=$(diff "$unit" "$copy" | grep -c '^>' || true)
    if [[ $changed != "$expected" ]]; then
        echo "check-unit: expected $unit to have $expected Exec line(s) running $installed_binary; found $changed" >&2
        exit 1
    fi

    # 1. verify. It prints nothing for a clean unit; any line is a warning or an error.
    status=0
    output=$(cd "$work" && systemd-analyze verify --no-pager --man=no "$copy" 2>&1) || status=$?
    if [[ $status != 0 || -n $output ]]; then
        echo "check-unit: systemd-analyze verify $unit (exit status $status):" >&2
        printf '%s\n' "$output" | sed "s|$work/|systemd/|g" >&2
        exit 1
    fi
    echo "check-unit: systemd-analyze verify $unit: clean"

    # 2. security.
    report=$(cd "$work" && systemd-analyze security --offline=yes --no-pager "$copy" 2>&1) || {
        echo "check-unit: systemd-analyze security --offline=yes $unit failed:" >&2
        printf '%s\n' "$report" >&2
        exit 1
    }
    exposure=$(printf '%s\n' "$report" | sed -n "s/.*Overall exposure level for ${name//./\\.}: \([0-9][0-9]*\.[0-9]\).*/\1/p")
    if [[ -z $exposure ]]; then
        echo "check-unit: no overall exposure level in the output of systemd-analyze security:" >&2
        printf '%s\n' "$report" >&2
        exit 1
    fi
    echo "check-unit: remaining exposures (setting, what it means, weight):"
    printf '%s\n' "$report" | grep '^✗' | sed -E 's/^✗ +//; s/ {2,}/ | /g; s/^/    /'
    echo "figure: $figure: $exposure"
    if awk -v value="$exposure" -v limit="$max_exposure" 'BEGIN { exit !(value > limit) }'; then
        echo "check-unit: the overall exposure $exposure is above $max_exposure" >&2
        exit 1
    fi
}

check_unit systemd/sleepproxyd.service /usr/local/sbin/sleepproxyd 1 "systemd-analyze security"
check_unit systemd/sleepproxy-client.service /usr/local/bin/sleepproxy-client 2 \
    "systemd-analyze security sleepproxy-client"

# 3. sysusers, applied to an empty root.
mkdir -p "$work/root/etc"
if ! output=$(systemd-sysusers --root="$work/root" "$PWD/$sysusers" 2>&1); then
    echo "check-unit: systemd-sysusers $sysusers failed:" >&2
    printf '%s\n' "$output" >&2
    exit 1
fi
if ! grep -q '^sleepproxy:' "$work/root/etc/passwd" || ! grep -q '^sleepproxy:' "$work/root/etc/group"; then
    echo "check-unit: $sysusers did not create the sleepproxy user and group" >&2
    exit 1
fi
echo "check-unit: $sysusers creates the sleepproxy user and group"
