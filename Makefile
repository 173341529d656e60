# sleepproxy: one entry point for building, running and testing.
#
#   sudo make run     install what is missing, build and run the daemon
#   sudo make test    formatter lint, warning-free build, every test (lab tests need root), short fuzz runs
#   make bench        benchmarks (release build), printing `figure: value` lines
#   make fuzz         long fuzz runs (FUZZ_SECONDS each, default 3600)

SWIFT ?= swift
FUZZ_SECONDS ?= 3600
SHORT_FUZZ_SECONDS ?= 60

.PHONY: all deps build lint format test unit-test fuzz-short fuzz bench run clean

all: build

deps:
	@scripts/install-deps.sh

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
	$(SWIFT) build -c release --product SleepProxyBenchmarks
	.build/release/SleepProxyBenchmarks

run: deps
	$(SWIFT) build -c release --product sleepproxyd
	.build/release/sleepproxyd

clean:
	rm -rf .build
