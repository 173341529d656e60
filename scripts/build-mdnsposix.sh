#!/usr/bin/env bash
# Builds Apple's stand-alone mDNS responder for Linux, mDNSResponderPosix, for the lab tests that run Apple's own
# mDNS code on the sleeper (Tests/TestLab/MDNSPosix.swift), and mDNSSleeperPosix, our own small program
# (scripts/mdnsposix-sleeper.c) that publishes a service through the same Apple core and can be told to sleep.
# Apple's code is not part of this repository; give this script a source tree of
# apple-oss-distributions/mDNSResponder, or a git directory (a bare mirror) whose HEAD is exported:
#
#   scripts/build-mdnsposix.sh SOURCE OUTDIR
#
# SOURCE is only read: the tree is copied to a temporary directory and built there. OUTDIR receives
# mDNSResponderPosix and mDNSSleeperPosix. Needs make and a C compiler (cc, or the clang of the Swift
# toolchain); no TLS library.
#
# Two make variables set on the command line, not a change to Apple's files:
# - MDNS_DEBUGMSGS=1, so the responder writes its debug messages to its standard error: when its services are
#   registered ("Callback: ... Name Registered") and any name conflict and rename ("Name Conflict", "renamed
#   from"), which the tests read.
# - A header of ours included first in every file, which sends what Apple's code logs through syslog(3) (a host
#   name conflict: "already in use") to standard error instead, so that a responder in a lab host writes to the
#   machine's own log nothing at all.
set -euo pipefail

usage() {
    echo "usage: $0 SOURCE OUTDIR" >&2
    echo "  SOURCE: an mDNSResponder source tree (with mDNSPosix/Makefile), or a git directory to export HEAD from" >&2
    echo "  OUTDIR: where mDNSResponderPosix goes (created if missing)" >&2
    exit 2
}
fail() {
    echo "build-mdnsposix: $*" >&2
    exit 1
}

(($# == 2)) || usage
source=$1
outdir=$2

command -v make >/dev/null || fail "make is not installed (apt-get install make)"
compiler=${CC:-}
if [[ -z $compiler ]]; then
    for candidate in cc gcc clang; do
        if command -v "$candidate" >/dev/null; then
            compiler=$candidate
            break
        fi
    done
fi
[[ -n $compiler ]] || fail "no C compiler found (cc, gcc or clang); set CC or apt-get install gcc"

work=$(mktemp -d "${TMPDIR:-/tmp}/build-mdnsposix.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$work/src

if [[ -f $source/mDNSPosix/Makefile ]]; then
    mkdir "$tree"
    cp -a "$source/." "$tree/"
elif [[ -d $source ]] && ! command -v git >/dev/null; then
    fail "$source has no mDNSPosix/Makefile, and git is not installed to read it as a git directory"
elif [[ -d $source ]] && git --git-dir="$source" rev-parse --verify --quiet HEAD >/dev/null 2>&1; then
    command -v tar >/dev/null || fail "tar is needed to export $source"
    mkdir "$tree"
    git --git-dir="$source" archive HEAD | tar -x -C "$tree"
    [[ -f $tree/mDNSPosix/Makefile ]] || fail "HEAD of $source has no mDNSPosix/Makefile: not mDNSResponder's source?"
elif [[ -e $source ]]; then
    fail "$source is neither an mDNSResponder source tree (no mDNSPosix/Makefile) nor a git directory"
else
    fail "$source does not exist"
fi
# Objects a tree may hold from an earlier build were made without the flags below.
rm -rf "$tree/mDNSPosix/objects" "$tree/mDNSPosix/build"

cat >"$work/log-to-stderr.h" <<'HEADER'
/* Included first in every file of the lab build: the responder's syslog(3) messages go to its standard error. */
#include <stdio.h>
#include <syslog.h>
#define openlog(ident, option, facility) ((void)(ident), (void)(option), (void)(facility))
#define syslog(priority, ...) \
    ((void)(priority), fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), fflush(stderr))
HEADER

# Our program goes next to Responder.c in the copy, and a makefile of ours links it from the same objects as
# mDNSResponderPosix, with Apple's makefile's own variables.
cp "$(dirname "$0")/mdnsposix-sleeper.c" "$tree/mDNSPosix/mDNSSleeperPosix.c"
cat >"$work/sleeper.mk" <<'MAKEFILE'
SASleeper: setup $(BUILDDIR)/mDNSSleeperPosix
$(BUILDDIR)/mDNSSleeperPosix: $(COMMONOBJ) $(TLSOBJS) $(OBJDIR)/mDNSSleeperPosix.c.o
	$(CC) $+ -o $@ $(LINKOPTS)
MAKEFILE

log=$work/make.log
if ! make -C "$tree/mDNSPosix" -f Makefile -f "$work/sleeper.mk" os=linux tls=no CC="$compiler" \
    CFLAGS="-include $work/log-to-stderr.h" CFLAGS_DEBUGGING="-g -DMDNS_DEBUGMSGS=1" \
    SAResponder SASleeper >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    fail "the build failed (the end of its output is above)"
fi
mkdir -p "$outdir"
for program in mDNSResponderPosix mDNSSleeperPosix; do
    built=$tree/mDNSPosix/build/prod/$program
    [[ -x $built ]] || fail "make succeeded but left no $built"
    install -m 0755 "$built" "$outdir/$program"
    echo "build-mdnsposix: $outdir/$program"
done
