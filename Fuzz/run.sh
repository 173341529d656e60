#!/usr/bin/env bash
# Builds the libFuzzer targets with -sanitize=fuzzer,address and runs each for a while.
#
#   Fuzz/run.sh                 # every target, 60 s each (the test command runs this)
#   Fuzz/run.sh 3600            # every target, an hour each, for a longer local run
#   Fuzz/run.sh 600 config      # one target
#
# Targets:
#   dns        DNSMessage decoding (DNSWire)
#   frames     Ethernet frame parsing (Frames)
#   control    control socket request lines, split, size-limited and decoded as the daemon does (SleepProxyControl)
#   keepalive  the RDATA of keepalive records (SleepProxyCore)
#   config     the config file (SleepProxyDaemon's Config/, on TOMLKit)
#
# The project's modules are compiled here with swiftc, instrumented. The config target also links TOMLKit (with
# its C++ toml++), swift-log and CNetSupport as SwiftPM's debug build made them, uninstrumented: after `make build`
# that build is already there and `swift build --target SleepProxyDaemon` only checks it. FUZZ_SCRATCH_PATH
# (default .build) is the SwiftPM scratch path; modules and fuzzers are rebuilt only when their inputs change.
#
# Corpora live in $FUZZ_SCRATCH_PATH/fuzz/corpus-<target> (seeded from the test fixtures) and persist between runs;
# a crash leaves its input in $FUZZ_SCRATCH_PATH/fuzz/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
only=${2:-}
targets=(dns frames control keepalive config)
if [[ -n "$only" && ! " ${targets[*]} " =~ " $only " ]]; then
    echo "fuzz: no target $only; the targets are ${targets[*]}" >&2
    exit 2
fi
if [[ -n "$only" ]]; then selected=("$only"); else selected=("${targets[@]}"); fi
wants() { [[ " ${selected[*]} " =~ " $1 " ]]; }

scratch=${FUZZ_SCRATCH_PATH:-.build}
out=$scratch/fuzz
mkdir -p "$out/logs"
flags=(-sanitize=fuzzer,address -parse-as-library -O -g -wmo -use-ld=lld -swift-version 6
    -enable-upcoming-feature ExistentialAny -enable-upcoming-feature MemberImportVisibility
    -enable-upcoming-feature InternalImportsByDefault -I "$out" -I Sources/CBuildInfo/include)

# Two runs at once build one at a time; the second finds the first's products up to date.
exec 9>"$out/build.lock"
flock 9

# Everything is stale when the compiler or this script changes.
stamp=$out/build.stamp
{ swiftc --version 2>&1; cat Fuzz/run.sh; } >"$stamp.new"
if cmp -s "$stamp.new" "$stamp"; then rm "$stamp.new"; else mv "$stamp.new" "$stamp"; fi

stale() {  # stale OUTPUT INPUTS...: whether OUTPUT is missing or older than an input
    local output=$1
    shift
    [[ ! -e "$output" ]] && return 0
    [[ -n "$(find "$@" "$stamp" -newer "$output" -print -quit)" ]]
}

module() {  # module NAME DEPENDENCIES -- SOURCES...: an instrumented module and object in $out
    local name=$1 dependencies=() more=()
    shift
    while [[ $1 != -- ]]; do dependencies+=("$out/$1.swiftmodule"); shift; done
    shift
    # The modules on SwiftPM's side (see below) for those that import them.
    if [[ $name == LeaseStore || $name == NetworkIO || $name == TOMLConfig || $name == SleepProxyDaemon ]]; then
        more=("${packaged_flags[@]}")
        dependencies+=("${packaged_modules[@]}")
    fi
    stale "$out/$name.o" "$@" "${dependencies[@]}" || return 0
    if ! swiftc "${flags[@]}" "${more[@]}" -c -module-name "$name" -emit-module \
        -emit-module-path "$out/$name.swiftmodule" "$@" -o "$out/$name.o" >"$out/logs/$name.build.log" 2>&1; then
        cat "$out/logs/$name.build.log" >&2
        echo "fuzz: building $name FAILED" >&2
        return 1
    fi
}

together() {  # together COMMAND...: runs each quoted command in the background; fails if any fails
    local pids=() status=0
    for command in "$@"; do eval "$command" & pids+=($!); done
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    return $status
}

packaged_flags=()
packaged_modules=()
packaged=()
if wants config; then
    # TOMLKit, CTOML (C++), Logging and CNetSupport from SwiftPM's debug build; the system libraries' module maps.
    swift build --scratch-path "$scratch" --target SleepProxyDaemon >"$out/logs/swiftpm.log" 2>&1 \
        || { cat "$out/logs/swiftpm.log" >&2; echo "fuzz: swift build FAILED" >&2; exit 1; }
    bin=$(swift build --scratch-path "$scratch" --show-bin-path)
    packaged_flags=(-I "$bin/Modules" -I Sources/CPcap -I Sources/CSQLite
        -Xcc -fmodule-map-file="$bin/CNetSupport.build/module.modulemap"
        -Xcc -fmodule-map-file="$bin/CTOML.build/module.modulemap")
    packaged_modules=("$bin/Modules/TOMLKit.swiftmodule" "$bin/Modules/Logging.swiftmodule")
    packaged=("$bin"/TOMLKit.build/*.swift.o "$bin"/CTOML.build/Sources/*.o "$bin"/Logging.build/*.swift.o
        "$bin"/CNetSupport.build/*.o)
fi

sources() { find "Sources/$1" -name '*.swift' | sort; }
# CBuildInfo, the C target SleepProxyControl imports (its module map is in its include folder).
if wants control || wants config; then
    if stale "$out/CBuildInfo.o" Sources/CBuildInfo; then
        clang -O -g -fsanitize=fuzzer-no-link,address -I Sources/CBuildInfo/include -c Sources/CBuildInfo/build_info.c \
            -o "$out/CBuildInfo.o" || { echo "fuzz: building CBuildInfo FAILED" >&2; exit 1; }
    fi
fi
wave1=("module NetworkAddresses -- \$(sources NetworkAddresses)")
wants control || wants config && wave1+=("module SleepProxyControl -- \$(sources SleepProxyControl)")
together "${wave1[@]}"
wave2=()
wants dns || wants keepalive || wants config && wave2+=("module DNSWire NetworkAddresses -- \$(sources DNSWire)")
wants frames || wants keepalive || wants config && wave2+=("module Frames NetworkAddresses -- \$(sources Frames)")
((${#wave2[@]})) && together "${wave2[@]}"
if wants keepalive || wants config; then
    module SleepProxyCore NetworkAddresses DNSWire Frames -- $(sources SleepProxyCore)
fi
if wants config; then
    together "module LeaseStore NetworkAddresses DNSWire SleepProxyCore -- \$(sources LeaseStore)" \
        "module NetworkIO NetworkAddresses -- \$(sources NetworkIO)" \
        "module TOMLConfig -- \$(sources TOMLConfig)"
    # Of SleepProxyDaemon, the config file's part (Config/): the rest (the metrics endpoint on swift-nio, the
    # shells) is not what this target fuzzes, and would need every package's modules and objects here.
    module SleepProxyDaemon NetworkAddresses DNSWire Frames SleepProxyCore LeaseStore SleepProxyControl NetworkIO \
        TOMLConfig -- $(sources SleepProxyDaemon/Config)
fi

build() {  # build TARGET MAIN OBJECTS...: the fuzzer executable
    local target=$1 main=$2 more=()
    shift 2
    [[ $target == config ]] && more=("${packaged_flags[@]}" -lstdc++)
    stale "$out/$target-fuzzer" "$main" "$@" || return 0
    if ! swiftc "${flags[@]}" "${more[@]}" -module-name "${target}Fuzzer" "$main" "$@" \
        -o "$out/$target-fuzzer" >"$out/logs/$target.build.log" 2>&1; then
        cat "$out/logs/$target.build.log" >&2
        echo "fuzz: building the $target fuzzer FAILED" >&2
        return 1
    fi
}
links=()
wants dns && links+=("build dns Fuzz/DNSMessageFuzzer.swift $out/NetworkAddresses.o $out/DNSWire.o")
wants frames && links+=("build frames Fuzz/FrameFuzzer.swift $out/NetworkAddresses.o $out/Frames.o")
wants control && links+=("build control Fuzz/ControlRequestFuzzer.swift $out/SleepProxyControl.o $out/CBuildInfo.o")
core=("$out/NetworkAddresses.o" "$out/DNSWire.o" "$out/Frames.o" "$out/SleepProxyCore.o")
wants keepalive && links+=("build keepalive Fuzz/KeepaliveRecordFuzzer.swift ${core[*]}")
daemon=("${core[@]}" "$out/LeaseStore.o" "$out/SleepProxyControl.o" "$out/CBuildInfo.o" "$out/NetworkIO.o"
    "$out/TOMLConfig.o" "$out/SleepProxyDaemon.o")
wants config && links+=("build config Fuzz/ConfigFileFuzzer.swift ${daemon[*]} \"\${packaged[@]}\"")
together "${links[@]}"
flock -u 9

# Per target: the longest input worth trying (control: just over the 16 KiB request limit; keepalive: a length
# byte cannot count more than 255), and how long one fuzzer process runs. TOMLKit never frees a parsed table nor
# most of what its C++ shim hands back (about 14 KB an input), so config runs in processes of 30 s, each well under
# libFuzzer's 2 GB limit, and without the leak check after every input (it would find TOMLKit's leaks each time,
# and slow the run tenfold); the leak check at the end of each process still runs, with TOMLKit's leaks suppressed.
declare -A options=([control]="-max_len=16500" [keepalive]="-max_len=300" [config]="-max_len=8192 -detect_leaks=0")
declare -A slices=([config]=30)
export LSAN_OPTIONS=suppressions=$PWD/Fuzz/lsan-suppressions.txt:print_suppressions=0
# The Swift runtime's crash backtracer would get in the way of the sanitizer's report.
export SWIFT_BACKTRACE=enable=no

fuzz() {  # fuzz TARGET: runs it for $seconds in processes of at most its slice; prints its figures
    local target=$1 left=$seconds slice=${slices[$1]:-$seconds} executed=0 rss=0 log="$out/$1.log" dictionary=()
    [[ -f "Fuzz/$target.dict" ]] && dictionary=(-dict="Fuzz/$target.dict")
    : >"$log"
    while ((left > 0)); do
        local now=$((left < slice ? left : slice))
        # shellcheck disable=SC2086  # the options are words
        if ! "$out/$target-fuzzer" -max_total_time="$now" -print_final_stats=1 -artifact_prefix="$out/$target-" \
            "${dictionary[@]}" ${options[$target]:-} "$out/corpus-$target" 2>>"$log"; then
            tail -40 "$log"
            echo "fuzz: $target FAILED (log: $log)"
            return 1
        fi
        executed=$((executed + $(grep -o "number_of_executed_units: [0-9]*" "$log" | tail -1 | grep -o "[0-9]*$")))
        rss=$(grep -o "peak_rss_mb: *[0-9]*" "$log" | grep -o "[0-9]*$" | sort -n | tail -1)
        left=$((left - now))
    done
    echo "fuzz: $target executed $executed inputs in ${seconds}s ($((executed / (seconds > 0 ? seconds : 1)))/s)," \
        "peak RSS ${rss} MB, corpus $(find "$out/corpus-$target" -type f | wc -l) inputs"
}

status=0
for target in "${selected[@]}"; do
    mkdir -p "$out/corpus-$target"
    python3 Fuzz/seed.py "$target" "$out/corpus-$target"  # the fixtures and samples as starting corpus
    echo "fuzz: $target for ${seconds}s"
    fuzz "$target" || status=1
done
exit $status
