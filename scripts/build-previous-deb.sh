#!/usr/bin/env bash
# The previous release's Debian package, for the boot test's upgrade (Tests/SleepProxyDaemonTests/Package): built
# from the release's git tag (PREVIOUS_RELEASE, default v0.2.0, sleepproxyd 0.2.0-1 in debian/changelog) with that
# release's own scripts/build-deb.sh, in a copy of the tagged tree (git archive), into OUT_DIR (default
# dist/previous). A package already there from the same commit is kept.
#
# A clone without the tag (git fetch --tags brings it) builds nothing: this says so and exits 2, and the upgrade
# test says it is skipped and why.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${PREVIOUS_RELEASE:-v0.2.0}
out=$(realpath -m "${1:-dist/previous}")

if ! commit=$(git rev-parse --verify -q "refs/tags/$tag^{commit}"); then
    echo "build-previous-deb: no tag $tag in this clone (git fetch --tags): the previous release is not built," \
        "and the boot test's upgrade is skipped" >&2
    exit 2
fi
if [[ -f $out/commit && $(cat "$out/commit") == "$commit" ]] && compgen -G "$out/sleepproxyd_*.deb" >/dev/null; then
    echo "build-previous-deb: $tag ($commit) already built in $out"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git archive --format=tar --prefix=source/ "$commit" | tar -x -C "$work"
rm -rf "$out"
echo "build-previous-deb: $tag ($commit) in $work/source"
"$work/source/scripts/build-deb.sh" "$out"
echo "$commit" >"$out/commit"
