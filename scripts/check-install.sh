#!/usr/bin/env bash
# Checks `make install` and `make uninstall` in a temporary DESTDIR (systemd and the machine's users are left
# alone there):
#   - install puts exactly the expected files there, with their modes, and the installed programs run;
#   - a second install keeps a configuration file that was changed;
#   - uninstall removes everything but the configuration file.
# It installs the debug build by default (BUILD_CONFIGURATION=debug), which `make build` has already made: the
# check costs seconds, not a release build. SWIFT_BUILD_FLAGS (default none) is passed on.
set -euo pipefail
cd "$(dirname "$0")/.."

root=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$root" "$log"' EXIT
chmod 0755 "$root"
arguments=(--no-print-directory DESTDIR="$root" PREFIX=/usr/local BUILD_CONFIGURATION="${BUILD_CONFIGURATION:-debug}"
    SWIFT_BUILD_FLAGS="${SWIFT_BUILD_FLAGS:-}")

command -v man >/dev/null || { echo "check-install: man is missing (it checks the manual pages); apt-get install -y man-db" >&2; exit 1; }

fail() {
    echo "check-install: $*" >&2
    echo "check-install: make output:" >&2
    cat "$log" >&2
    exit 1
}

# The files below $root, with their modes.
tree() {
    (cd "$root" && find . \( -type f -o -type l \) -printf '%m %P\n' | sort -k2)
}

if ! make "${arguments[@]}" install >"$log" 2>&1; then
    fail "make install DESTDIR=$root failed"
fi

expected=$(
    sort -k2 <<'EOF'
755 usr/local/sbin/sleepproxyd
755 usr/local/bin/sleepproxyctl
755 usr/local/bin/sleepproxy-client
644 etc/systemd/system/sleepproxyd.service
644 etc/systemd/system/sleepproxy-client.service
644 etc/sleepproxy/client.toml
644 etc/sysusers.d/sleepproxy.conf
644 etc/sleepproxy/sleepproxy.toml
644 usr/local/share/doc/sleepproxy/README.md
644 usr/local/share/bash-completion/completions/sleepproxyctl
644 usr/local/share/zsh/site-functions/_sleepproxyctl
644 usr/local/share/fish/vendor_completions.d/sleepproxyctl.fish
644 usr/local/share/man/man8/sleepproxyd.8
644 usr/local/share/man/man1/sleepproxyctl.1
644 usr/local/share/man/man5/sleepproxy.toml.5
644 usr/local/share/man/man8/sleepproxy-client.8
644 usr/local/share/man/man5/sleepproxy-client.toml.5
EOF
)
if [[ $(tree) != "$expected" ]]; then
    fail "the installed tree differs from the expected one (- expected, + installed):
$(diff <(printf '%s\n' "$expected") <(tree) | grep '^[<>]' | sed 's/^</-/; s/^>/+/')"
fi
cmp -s systemd/sleepproxyd.service "$root/etc/systemd/system/sleepproxyd.service" ||
    fail "with the default PREFIX the installed unit should be systemd/sleepproxyd.service unchanged"
cmp -s systemd/sleepproxy-client.service "$root/etc/systemd/system/sleepproxy-client.service" ||
    fail "with the default PREFIX the installed unit should be systemd/sleepproxy-client.service unchanged"
cmp -s Config/client.toml "$root/etc/sleepproxy/client.toml" || fail "the client's sample configuration was not copied"
cmp -s Config/sleepproxy.toml "$root/etc/sleepproxy/sleepproxy.toml" || fail "the sample configuration was not copied"
for completion in usr/local/share/bash-completion/completions/sleepproxyctl \
    usr/local/share/zsh/site-functions/_sleepproxyctl usr/local/share/fish/vendor_completions.d/sleepproxyctl.fish; do
    grep -q sleepproxyctl "$root/$completion" || fail "$completion does not complete sleepproxyctl"
done
head -1 "$root/usr/local/share/bash-completion/completions/sleepproxyctl" | grep -q '^#!' &&
    fail "the bash completion starts with a #! line (bash sources it)"
# The manual pages render without a warning from man (groff), as lintian checks them in the package.
for page in usr/local/share/man/man8/sleepproxyd.8 usr/local/share/man/man1/sleepproxyctl.1 \
    usr/local/share/man/man5/sleepproxy.toml.5 usr/local/share/man/man8/sleepproxy-client.8 \
    usr/local/share/man/man5/sleepproxy-client.toml.5; do
    warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$root/$page" 2>&1 >/dev/null)
    [[ -z $warnings ]] || fail "man warns about $page: $warnings"
done
grep -q -- '--check-config' "$root/usr/local/share/man/man8/sleepproxyd.8" ||
    fail "sleepproxyd.8 does not describe the options"
"$root/usr/local/sbin/sleepproxyd" --help >/dev/null || fail "the installed sleepproxyd does not run"
"$root/usr/local/bin/sleepproxyctl" --help >/dev/null || fail "the installed sleepproxyctl does not run"
"$root/usr/local/bin/sleepproxy-client" --help >/dev/null || fail "the installed sleepproxy-client does not run"

# A changed configuration survives the next install.
echo "# changed by the administrator" >>"$root/etc/sleepproxy/sleepproxy.toml"
make "${arguments[@]}" install >"$log" 2>&1 || fail "the second make install failed"
grep -q "changed by the administrator" "$root/etc/sleepproxy/sleepproxy.toml" ||
    fail "a second make install overwrote the configuration file"
grep -q "kept the existing" "$log" || fail "a second make install did not say that it kept the configuration file"

# Uninstall leaves the configuration only.
make "${arguments[@]}" uninstall >"$log" 2>&1 || fail "make uninstall failed"
left=$(tree)
[[ $left == $'644 etc/sleepproxy/client.toml\n644 etc/sleepproxy/sleepproxy.toml' ]] || fail "make uninstall left other files than the configuration:
$left"
grep -q "kept the configuration" "$log" || fail "make uninstall did not say that it kept the configuration file"
echo "check-install: make install and make uninstall (DESTDIR, ${BUILD_CONFIGURATION:-debug} build): as expected"
