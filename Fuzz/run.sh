#!/usr/bin/env bash
# Builds the libFuzzer targets with -sanitize=fuzzer,address and runs each for a while.
#
#   Fuzz/run.sh                 # every target, 60 s each (the test command runs this)
#   Fuzz/run.sh 3600            # every target, an hour each, for a longer local run
#   Fuzz/run.sh 600 dns         # one target
#
# Corpora live in .build/fuzz/corpus-<target> (seeded from the test fixtures) and persist between runs; a crash
# leaves its input in .build/fuzz/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
only=${2:-}
out=.build/fuzz
mkdir -p "$out"
flags=(-sanitize=fuzzer,address -parse-as-library -O -g -wmo -use-ld=lld
    -enable-upcoming-feature ExistentialAny -enable-upcoming-feature MemberImportVisibility
    -enable-upcoming-feature InternalImportsByDefault -I "$out")

module() {  # module NAME SOURCES...
    local name=$1
    shift
    swiftc "${flags[@]}" -c -module-name "$name" -emit-module -emit-module-path "$out/$name.swiftmodule" \
        "$@" -o "$out/$name.o"
}

module NetworkAddresses Sources/NetworkAddresses/*.swift
module DNSWire Sources/DNSWire/*.swift
module Frames Sources/Frames/*.swift

build() {  # build TARGET MAIN OBJECTS...
    local target=$1 main=$2
    shift 2
    swiftc "${flags[@]}" -module-name "${target}Fuzzer" "$main" "$@" -o "$out/$target-fuzzer"
}
build dns Fuzz/DNSMessageFuzzer.swift "$out/NetworkAddresses.o" "$out/DNSWire.o"
build frames Fuzz/FrameFuzzer.swift "$out/NetworkAddresses.o" "$out/Frames.o"

seed() {  # seed TARGET: the fixture packets as starting corpus
    local target=$1 corpus="$out/corpus-$1"
    mkdir -p "$corpus"
    python3 Fuzz/seed.py "$target" "$corpus"
}

status=0
for target in dns frames; do
    [[ -n "$only" && "$only" != "$target" ]] && continue
    seed "$target"
    echo "fuzz: $target for ${seconds}s"
    if ! "$out/$target-fuzzer" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/$target-" \
        "$out/corpus-$target" 2>"$out/$target.log"; then
        tail -40 "$out/$target.log"
        echo "fuzz: $target FAILED (log: $out/$target.log)"
        status=1
    else
        grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$out/$target.log" | sed "s/^/fuzz: $target /"
    fi
done
exit $status
