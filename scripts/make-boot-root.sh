#!/usr/bin/env bash
# make-boot-root.sh DIR: a Debian 12 (bookworm) root that boots under `systemd-nspawn --boot`, for the package's
# boot test (Tests/TestLab/BootedSystem.swift). It holds systemd, dbus and the libraries the daemon links
# (libpcap, libsqlite3, libstdc++), so that `apt-get install ./sleepproxyd_*.deb` works in it with no network.
#
# Cached: built in DIR.tmp, then renamed to DIR; DIR/.boot-root-stamp records what it was built from (suite,
# mirror, packages, the version of the settings below). A rerun with the same inputs does nothing; other inputs
# build it again. A lock (DIR.lock) makes concurrent runs wait for each other. The downloaded packages are kept in
# DEB_CACHE (default: DIR's folder/debs) for the next build. Containers never write to DIR: they boot it with
# --volatile=overlay.
#
# Environment: MIRROR (http://deb.debian.org/debian), SUITE (bookworm), DEB_CACHE. Root only; needs debootstrap.
set -euo pipefail

(($# == 1)) || { echo "usage: $0 DIR" >&2; exit 2; }
((EUID == 0)) || { echo "make-boot-root: needs root" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "make-boot-root: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
dir=$(realpath -m "$1")
mirror=${MIRROR:-http://deb.debian.org/debian}
suite=${SUITE:-bookworm}
deb_cache=${DEB_CACHE:-$(dirname "$dir")/debs}
# Raise when the settings below change, so that cached roots are built again.
settings_version=1

# systemd, systemd-sysv: the init. dbus: the system bus (without it systemd-logind fails at every boot and the
# system is "degraded"). libnss-systemd: names of dynamic users. libpcap0.8, libsqlite3-0, libstdc++6, libgcc-s1:
# what the daemon links besides libc. iproute2, procps: ip, ps. libcap2-bin: setcap, which the container image's
# build uses when this root is its base (the image test imports it: the test machines reach no registry).
# runuser, setpriv, nsenter (util-linux) and useradd (passwd) are in minbase.
packages=systemd,systemd-sysv,dbus,libnss-systemd,libpcap0.8,libsqlite3-0,libstdc++6,libgcc-s1,iproute2,procps,libcap2-bin
stamp() {
    printf 'suite=%s\nmirror=%s\nsettings=%s\npackages=%s\n' "$suite" "$mirror" "$settings_version" "$packages"
}

mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
if [[ -f $dir/.boot-root-stamp ]] && [[ $(stamp) == "$(sed '/^built=/d' "$dir/.boot-root-stamp")" ]]; then
    echo "make-boot-root: $dir is up to date"
    exit 0
fi

start=$SECONDS
tmp=$dir.tmp
rm -rf --one-file-system "$tmp"
mkdir -p "$tmp" "$deb_cache"
echo "make-boot-root: debootstrap $suite into $tmp from $mirror"
if ! debootstrap --variant=minbase --include="$packages" --cache-dir="$deb_cache" "$suite" "$tmp" "$mirror" \
    >"$tmp.log" 2>&1; then
    tail -30 "$tmp.log" >&2
    echo "make-boot-root: debootstrap failed (log: $tmp.log)" >&2
    exit 1
fi

# The host name the proxy advertises itself with (debootstrap copies the build machine's).
echo sleepproxy-test >"$tmp/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tsleepproxy-test\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$tmp/etc/hosts"
# An empty machine-id: each boot gets a transient one from nspawn, and no first-boot logic runs.
: >"$tmp/etc/machine-id"
rm -f "$tmp/var/lib/dbus/machine-id"
ln -s /etc/machine-id "$tmp/var/lib/dbus/machine-id"
# No name servers in the test's namespaces.
: >"$tmp/etc/resolv.conf"
# The journal in memory, every line kept (the test reads the daemon's), nothing on the console.
mkdir -p "$tmp/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\nRateLimitIntervalSec=0\nRateLimitBurst=0\nForwardToConsole=no\nForwardToWall=no\n' \
    >"$tmp/etc/systemd/journald.conf.d/10-boot-test.conf"
# Nobody logs in (commands enter with nsenter), and no timers or time sync run during a test.
for unit in console-getty.service container-getty@.service getty@.service serial-getty@.service getty.target \
    apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer e2scrub_reap.service \
    fstrim.timer systemd-timesyncd.service systemd-networkd-wait-online.service; do
    ln -sf /dev/null "$tmp/etc/systemd/system/$unit"
done
ln -sf /lib/systemd/system/multi-user.target "$tmp/etc/systemd/system/default.target"
# apt without package lists or network: a local .deb whose dependencies are installed.
printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\nAcquire::Languages "none";\n' \
    >"$tmp/etc/apt/apt.conf.d/90-boot-test"
chroot "$tmp" apt-get clean
rm -rf "$tmp/var/lib/apt/lists/"* "$tmp/var/log/"*.log
mkdir -p "$tmp/var/lib/apt/lists/partial"
mv "$tmp.log" "$tmp/var/log/debootstrap.log"

stamp >"$tmp/.boot-root-stamp"
echo "built=$(date -u +%FT%TZ)" >>"$tmp/.boot-root-stamp"
if [[ -e $dir ]]; then
    rm -rf --one-file-system "$dir.old"
    mv "$dir" "$dir.old"
fi
mv "$tmp" "$dir"
rm -rf --one-file-system "$dir.old"
echo "make-boot-root: built $dir in $((SECONDS - start)) s ($(du -sh "$dir" | cut -f1))"
