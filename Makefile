# sleepproxy: one entry point for building, running and testing.
#
#   sudo make run     install what is missing, build, run the daemon on the default route's interface
#   sudo make test    formatter lint, warning-free build, every test (lab tests need root), short fuzz runs
#   make bench        benchmarks (release build), printing `figure: value` lines
#   make fuzz         long fuzz runs (FUZZ_SECONDS each, default 3600)

SWIFT ?= swift
FUZZ_SECONDS ?= 3600
SHORT_FUZZ_SECONDS ?= 60
# The interface of the default route, and a state directory inside the checkout.
INTERFACE ?= $(shell ip -o route show default 2>/dev/null | awk '{print $$5; exit}')
STATE_DIR ?= $(CURDIR)/.state

.PHONY: all deps build lint format test unit-test fuzz-short fuzz bench run clean

all: build

deps:
	@scripts/install-deps.sh
	@if [ "$$(id -u)" = 0 ]; then bash scripts/install-mdns-test-tools.sh; else echo "deps: not root: avahi and dig for the lab tests are not installed here"; fi

build: deps
	@scripts/check-build.sh

lint:
	$(SWIFT) format lint --strict --recursive Package.swift Sources Tests Benchmarks Fuzz

format:
	$(SWIFT) format format --in-place --recursive Package.swift Sources Tests Benchmarks Fuzz

unit-test: build
	$(SWIFT) test --skip-build

fuzz-short: deps
	Fuzz/run.sh $(SHORT_FUZZ_SECONDS)

test: lint unit-test fuzz-short

fuzz: deps
	Fuzz/run.sh $(FUZZ_SECONDS)

bench: deps
	@command -v dnsperf >/dev/null || { [ "$$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dnsperf; } \
		|| echo "bench: dnsperf is missing; the mdns benchmark will say so and skip"
	$(SWIFT) build -c release --product SleepProxyBenchmarks --product sleepproxyd
	.build/release/SleepProxyBenchmarks

run: deps
	$(SWIFT) build -c release --product sleepproxyd
	@test -n "$(INTERFACE)" || { echo "make run: no default route; name the interface: make run INTERFACE=eth0"; exit 1; }
	.build/release/sleepproxyd --interface $(INTERFACE) --state-dir $(STATE_DIR)

clean:
	rm -rf .build .state
