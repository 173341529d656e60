# sleepproxy: one entry point for building, running and testing.
#
#   sudo make run     install what is missing, build, run the daemon on the default route's interface
#   sudo make test    formatter lint, unit check, the Debian package (root), warning-free build, every test (lab
#                     tests and the package's boot test need root), install check, short fuzz runs
#   sudo make bench   benchmarks (release build, lab), `figure: value` lines; BENCH="mdns wake" runs some by name
#   sudo make flood   hostile traffic against the daemon in the lab for FLOOD_SECONDS (default 60), with figures
#   make fuzz         long fuzz runs (FUZZ_SECONDS each, default 3600)
#   sudo make install    release build; daemon, CLI, systemd unit, sysusers file, sample config, manual pages,
#                        completions
#   sudo make uninstall  removes what install put there, except the config file and the state directory
#   sudo make deb        the Debian package (dpkg-buildpackage), checked with lintian, in dist/

SWIFT ?= swift
FUZZ_SECONDS ?= 3600
SHORT_FUZZ_SECONDS ?= 60
FLOOD_SECONDS ?= 60
FLOOD_BUILD_FLAGS ?=
# The interface of the default route, and a state directory inside the checkout.
INTERFACE ?= $(shell ip -o route show default 2>/dev/null | awk '{print $$5; exit}')
STATE_DIR ?= $(CURDIR)/.state

# Installation. DESTDIR stages into another root (packaging, the install check); systemd is then left alone.
PREFIX ?= /usr/local
DESTDIR ?=
# The builds of install: the configuration, and flags. The Swift runtime and Foundation are linked in statically so
# that the installed programs do not depend on where (or whether) the toolchain stays installed.
BUILD_CONFIGURATION ?= release
SWIFT_BUILD_FLAGS ?= --static-swift-stdlib
BINDIR = $(PREFIX)/bin
SBINDIR = $(PREFIX)/sbin
DATADIR = $(PREFIX)/share
DOCDIR = $(DATADIR)/doc/sleepproxy
MANDIR = $(DATADIR)/man
# The date in the manual pages (YYYY-MM-DD); empty: today. The package build sets the changelog's.
MAN_DATE ?=
# Not under PREFIX: the unit's ConfigurationDirectory= is /etc/sleepproxy whatever the prefix, and /etc/systemd/system
# is where units of software installed under /usr/local belong (the distribution owns /lib/systemd/system).
CONFDIR = /etc/sleepproxy
UNITDIR = /etc/systemd/system
SYSUSERSDIR = /etc/sysusers.d
# Where bash-completion, zsh (Debian's fpath) and fish look under /usr/local/share.
BASH_COMPLETIONDIR = $(DATADIR)/bash-completion/completions
ZSH_COMPLETIONDIR = $(DATADIR)/zsh/site-functions
FISH_COMPLETIONDIR = $(DATADIR)/fish/vendor_completions.d
# systemd runs as the service manager (sd_booted(3)'s test).
SYSTEMD_RUNNING = test -d /run/systemd/system

.PHONY: all deps build lint format test unit-test unit-check install-check fuzz-short fuzz bench flood run clean \
	release install uninstall deb deb-for-test image soak

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

# The systemd unit: systemd-analyze verify and security (figure: systemd-analyze security: N.N), sysusers.
unit-check:
	@scripts/check-unit.sh

# make install into a temporary DESTDIR from the debug build that unit-test made, then make uninstall.
install-check: build
	@scripts/check-install.sh

fuzz-short: deps
	Fuzz/run.sh $(SHORT_FUZZ_SECONDS)

# The packages the boot tests install (Tests/SleepProxyDaemonTests/Package): this checkout's, and the previous
# release's from its git tag for the upgrade (scripts/build-previous-deb.sh; in a clone without the tag it says so and
# the upgrade test is skipped). Built as root only, since make deb installs its tools with apt; without root the boot
# tests say they are skipped.
deb-for-test:
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory deb; \
		scripts/build-previous-deb.sh $(DEB_DIR)/previous || [ $$? = 2 ]; \
	else echo "deb-for-test: not root: no package is built, and the boot tests are skipped"; fi

test: lint unit-check deb-for-test unit-test install-check fuzz-short

fuzz: deps
	Fuzz/run.sh $(FUZZ_SECONDS)

bench: deps
	@command -v dnsperf >/dev/null || { [ "$$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dnsperf; } \
		|| echo "bench: dnsperf is missing; the mdns benchmark will say so and skip"
	$(SWIFT) build -c release --product sleepproxyd
	$(SWIFT) build -c release --product sleepproxyctl
	$(SWIFT) build -c release --product sleepproxy-client
	$(SWIFT) build -c release --product SleepProxyBenchmarks
	stdbuf -oL .build/release/SleepProxyBenchmarks $(BENCH)

# The flood benchmark (root, python3): the release daemon in the lab, hostile traffic from one host while another
# registers, resolves, queries and wakes a sleeper. Figures as `flood_...: value` lines. FLOOD_BUILD_FLAGS adds
# build options (`--scratch-path DIR` builds elsewhere than .build).
# A month of a home network in an hour: the release daemon in the lab under churn, faults and restarts for
# SOAK_MINUTES (60), with an invariant checker; SOAK_SEED replays a run. Prints soak_... figures.
SOAK_MINUTES ?= 60
soak: deps
	$(SWIFT) build -c release --product sleepproxyd
	$(SWIFT) build -c release --product sleepproxyctl
	$(SWIFT) build -c release --product sleepproxy-client
	$(SWIFT) build -c release --product SleepProxyBenchmarks
	SOAK_MINUTES=$(SOAK_MINUTES) stdbuf -oL .build/release/SleepProxyBenchmarks soak

flood: deps
	$(SWIFT) build -c release $(FLOOD_BUILD_FLAGS) --product sleepproxyd
	$(SWIFT) build -c release $(FLOOD_BUILD_FLAGS) --product sleepproxyctl
	$(SWIFT) build -c release $(FLOOD_BUILD_FLAGS) --product SleepProxyBenchmarks
	FLOOD_SECONDS=$(FLOOD_SECONDS) \
		$$($(SWIFT) build -c release $(FLOOD_BUILD_FLAGS) --show-bin-path)/SleepProxyBenchmarks flood

run: deps
	$(SWIFT) build -c release --product sleepproxyd
	@test -n "$(INTERFACE)" || { echo "make run: no default route; name the interface: make run INTERFACE=eth0"; exit 1; }
	.build/release/sleepproxyd --interface $(INTERFACE) --state-dir $(STATE_DIR)

clean:
	rm -rf .build .state

# Builds what install copies. Only the packages building needs (not the lab's mDNS tools).
release:
	@scripts/install-deps.sh
	$(SWIFT) build -c $(BUILD_CONFIGURATION) $(SWIFT_BUILD_FLAGS) --product sleepproxyd
	$(SWIFT) build -c $(BUILD_CONFIGURATION) $(SWIFT_BUILD_FLAGS) --product sleepproxyctl
	$(SWIFT) build -c $(BUILD_CONFIGURATION) $(SWIFT_BUILD_FLAGS) --product sleepproxy-client

install: release
	@test -f Config/sleepproxy.toml || { echo "install: Config/sleepproxy.toml is missing"; exit 1; }
	$(eval BIN_PATH := $(shell $(SWIFT) build -c $(BUILD_CONFIGURATION) $(SWIFT_BUILD_FLAGS) --show-bin-path))
	scripts/make-man.sh $(BIN_PATH)/man $(BIN_PATH) $(MAN_DATE)
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(CONFDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(BASH_COMPLETIONDIR) $(DESTDIR)$(ZSH_COMPLETIONDIR) \
		$(DESTDIR)$(FISH_COMPLETIONDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(BIN_PATH)/sleepproxyd $(DESTDIR)$(SBINDIR)/sleepproxyd
	install -m 0755 $(BIN_PATH)/sleepproxyctl $(DESTDIR)$(BINDIR)/sleepproxyctl
	install -m 0755 $(BIN_PATH)/sleepproxy-client $(DESTDIR)$(BINDIR)/sleepproxy-client
	sed -e 's|/usr/local/sbin/sleepproxyd|$(SBINDIR)/sleepproxyd|' \
		-e 's|/usr/local/share/doc/sleepproxy|$(DOCDIR)|' systemd/sleepproxyd.service >$(DESTDIR)$(UNITDIR)/sleepproxyd.service
	sed -e 's|/usr/local/bin/sleepproxy-client|$(BINDIR)/sleepproxy-client|' \
		systemd/sleepproxy-client.service >$(DESTDIR)$(UNITDIR)/sleepproxy-client.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/sleepproxyd.service $(DESTDIR)$(UNITDIR)/sleepproxy-client.service
	install -m 0644 systemd/sleepproxy.sysusers $(DESTDIR)$(SYSUSERSDIR)/sleepproxy.conf
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -m 0644 $(BIN_PATH)/man/sleepproxyd.8 $(DESTDIR)$(MANDIR)/man8/sleepproxyd.8
	install -m 0644 $(BIN_PATH)/man/sleepproxyctl.1 $(DESTDIR)$(MANDIR)/man1/sleepproxyctl.1
	install -m 0644 $(BIN_PATH)/man/sleepproxy.toml.5 $(DESTDIR)$(MANDIR)/man5/sleepproxy.toml.5
	install -m 0644 $(BIN_PATH)/man/sleepproxy-client.8 $(DESTDIR)$(MANDIR)/man8/sleepproxy-client.8
	install -m 0644 $(BIN_PATH)/man/sleepproxy-client.toml.5 $(DESTDIR)$(MANDIR)/man5/sleepproxy-client.toml.5
	@# The sample configuration only where there is none: an existing file is never overwritten.
	@if [ -e $(DESTDIR)$(CONFDIR)/sleepproxy.toml ]; then \
		echo "install: kept the existing $(DESTDIR)$(CONFDIR)/sleepproxy.toml (the sample is Config/sleepproxy.toml)"; \
	else \
		echo "install -m 0644 Config/sleepproxy.toml $(DESTDIR)$(CONFDIR)/sleepproxy.toml"; \
		install -m 0644 Config/sleepproxy.toml $(DESTDIR)$(CONFDIR)/sleepproxy.toml; \
	fi
	@if [ -e $(DESTDIR)$(CONFDIR)/client.toml ]; then \
		echo "install: kept the existing $(DESTDIR)$(CONFDIR)/client.toml (the sample is Config/client.toml)"; \
	else \
		echo "install -m 0644 Config/client.toml $(DESTDIR)$(CONFDIR)/client.toml"; \
		install -m 0644 Config/client.toml $(DESTDIR)$(CONFDIR)/client.toml; \
	fi
	@# bash sources its completions: the generated script's #! line has no use there.
	$(BIN_PATH)/sleepproxyctl --generate-completion-script bash | sed '1{/^#!/d}' \
		>$(DESTDIR)$(BASH_COMPLETIONDIR)/sleepproxyctl
	$(BIN_PATH)/sleepproxyctl --generate-completion-script zsh >$(DESTDIR)$(ZSH_COMPLETIONDIR)/_sleepproxyctl
	$(BIN_PATH)/sleepproxyctl --generate-completion-script fish >$(DESTDIR)$(FISH_COMPLETIONDIR)/sleepproxyctl.fish
	chmod 0644 $(DESTDIR)$(BASH_COMPLETIONDIR)/sleepproxyctl $(DESTDIR)$(ZSH_COMPLETIONDIR)/_sleepproxyctl \
		$(DESTDIR)$(FISH_COMPLETIONDIR)/sleepproxyctl.fish
	@# On this machine (no DESTDIR): create the sleepproxy user and group now rather than at the next boot, and
	@# let a running systemd see the new unit.
	@if [ -z "$(DESTDIR)" ]; then \
		if command -v systemd-sysusers >/dev/null; then \
			echo "systemd-sysusers $(SYSUSERSDIR)/sleepproxy.conf"; systemd-sysusers $(SYSUSERSDIR)/sleepproxy.conf; \
		fi; \
		if $(SYSTEMD_RUNNING); then echo "systemctl daemon-reload"; systemctl daemon-reload; fi; \
		echo "install: done. Start it with: systemctl enable --now sleepproxyd"; \
		echo "install: let a user run sleepproxyctl: usermod -aG sleepproxy USER (then log in again)"; \
		echo "install: on a machine that sleeps behind a proxy: systemctl enable sleepproxy-client"; \
	fi

uninstall:
	@if [ -z "$(DESTDIR)" ] && $(SYSTEMD_RUNNING); then \
		echo "systemctl disable --now sleepproxyd.service"; systemctl disable --now sleepproxyd.service || true; \
		echo "systemctl disable sleepproxy-client.service"; systemctl disable sleepproxy-client.service || true; \
	fi
	rm -f $(DESTDIR)$(SBINDIR)/sleepproxyd $(DESTDIR)$(BINDIR)/sleepproxyctl $(DESTDIR)$(BINDIR)/sleepproxy-client \
		$(DESTDIR)$(UNITDIR)/sleepproxyd.service $(DESTDIR)$(UNITDIR)/sleepproxy-client.service \
		$(DESTDIR)$(SYSUSERSDIR)/sleepproxy.conf \
		$(DESTDIR)$(DOCDIR)/README.md $(DESTDIR)$(BASH_COMPLETIONDIR)/sleepproxyctl \
		$(DESTDIR)$(ZSH_COMPLETIONDIR)/_sleepproxyctl $(DESTDIR)$(FISH_COMPLETIONDIR)/sleepproxyctl.fish \
		$(DESTDIR)$(MANDIR)/man8/sleepproxyd.8 $(DESTDIR)$(MANDIR)/man1/sleepproxyctl.1 \
		$(DESTDIR)$(MANDIR)/man5/sleepproxy.toml.5 $(DESTDIR)$(MANDIR)/man8/sleepproxy-client.8 \
		$(DESTDIR)$(MANDIR)/man5/sleepproxy-client.toml.5
	@rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null || true
	@if [ -z "$(DESTDIR)" ] && $(SYSTEMD_RUNNING); then echo "systemctl daemon-reload"; systemctl daemon-reload; fi
	@echo "uninstall: kept the configuration $(DESTDIR)$(CONFDIR)/sleepproxy.toml and client.toml, the lease store" \
		"/var/lib/sleepproxy (/var/lib/private/sleepproxy under the unit) and the client's state" \
		"(/var/lib/private/sleepproxy-client); remove them by hand when no longer wanted."
	@echo "uninstall: kept the sleepproxy user and group (userdel sleepproxy removes both)."

# The Debian package, built with dpkg-buildpackage from this checkout (debian/), then checked with lintian; the
# .deb, .buildinfo and .changes end up in DEB_DIR. As root it installs what building needs (the Build-Depends,
# dpkg-dev, lintian) with apt; otherwise it names what is missing. The Swift toolchain must be on PATH.
DEB_DIR ?= $(CURDIR)/dist
deb:
	@scripts/build-deb.sh $(DEB_DIR)

# The container image (Containerfile) from the newest package in DEB_DIR (built first when there is none), with
# podman or docker: ENGINE, BASE (debian:12-slim) and IMAGE (sleepproxyd) choose; see scripts/build-image.sh.
image:
	@ls $(DEB_DIR)/sleepproxyd_*.deb >/dev/null 2>&1 || $(MAKE) --no-print-directory deb
	@DEB="$${DEB:-$$(ls -t $(DEB_DIR)/sleepproxyd_*.deb | head -n 1)}" scripts/build-image.sh
