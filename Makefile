# The two commands a new user needs (see README.md):
#   make demo   set up, build, and run the demo experiment in a guest
#   make test   set up, build, and run every test (unit + guest)
SHELL := /bin/bash
ENV := source scripts/env.sh &&

.PHONY: setup build demo test lint unit guest-test experiments compare soak vcpu-wake upstream-baseline host-build install uninstall

# Installing on a host (no QEMU, no guest kernel: only the BPF toolchain):
#   make host-build && sudo make install [PREFIX=/usr/local] [DESTDIR=...]
PREFIX ?= /usr/local
SBINDIR := $(PREFIX)/sbin
BINDIR := $(PREFIX)/bin
# /usr/local/lib/systemd/system and /usr/lib/systemd/system are both on
# systemd's unit path; .../lib/tmpfiles.d both on systemd-tmpfiles'.
UNITDIR ?= $(PREFIX)/lib/systemd/system
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
MANDIR := $(PREFIX)/share/man
DOCDIR := $(PREFIX)/share/doc/softpart
BASHCOMPDIR := $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR := $(PREFIX)/share/zsh/site-functions

setup:
	bash scripts/setup.sh

# The two binaries a host runs (scx_softpart, softpart) and what building
# them needs, nothing else.
host-build:
	bash scripts/setup.sh --host
	$(ENV) cargo build --release --locked -p scx_softpart -p softpart-cli -p softpart-observer -p softpart-nri

# The binaries (softpart-observe too: it measures the default scheduler
# before a switch), their man pages and shell completions, the systemd
# unit and its tmpfiles.d entry, the example config (also as
# /etc/softpart/softpart.toml unless one is there). Run `make host-build`
# (or `make build`) first, as yourself; install as root.
install:
	@test -x target/release/scx_softpart -a -x target/release/softpart -a -x target/release/softpart-mangen \
	  -a -x target/release/softpart-observe -a -x target/release/softpart-nri || \
	  { echo "install: no binaries in target/release: run make host-build first" >&2; exit 1; }
	install -D -m 755 target/release/scx_softpart $(DESTDIR)$(SBINDIR)/scx_softpart
	install -D -m 755 target/release/softpart $(DESTDIR)$(BINDIR)/softpart
	install -D -m 755 target/release/softpart-observe $(DESTDIR)$(BINDIR)/softpart-observe
	install -D -m 755 target/release/softpart-nri $(DESTDIR)$(BINDIR)/softpart-nri
	target/release/softpart-mangen $(DESTDIR)$(MANDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -d $(DESTDIR)$(UNITDIR)
	sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' \
	  packaging/softpart.service.in > $(DESTDIR)$(UNITDIR)/softpart.service
	chmod 644 $(DESTDIR)$(UNITDIR)/softpart.service
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' \
	  packaging/softpart-nri.service.in > $(DESTDIR)$(UNITDIR)/softpart-nri.service
	chmod 644 $(DESTDIR)$(UNITDIR)/softpart-nri.service
	install -D -m 644 packaging/softpart.tmpfiles $(DESTDIR)$(TMPFILESDIR)/softpart.conf
	install -D -m 644 packaging/softpart.toml $(DESTDIR)$(DOCDIR)/softpart.toml.example
	install -D -m 644 docs/config.md $(DESTDIR)$(DOCDIR)/config.md
	test -e $(DESTDIR)/etc/softpart/softpart.toml || \
	  install -D -m 644 packaging/softpart.toml $(DESTDIR)/etc/softpart/softpart.toml
	install -D -m 644 packaging/nri.toml $(DESTDIR)$(DOCDIR)/nri.toml.example
	test -e $(DESTDIR)/etc/softpart/nri.toml || \
	  install -D -m 644 packaging/nri.toml $(DESTDIR)/etc/softpart/nri.toml
	@# On a live system (no DESTDIR) make the runtime directory now, as boot would.
	if [ -z "$(DESTDIR)" ] && command -v systemd-tmpfiles >/dev/null; then \
	  systemd-tmpfiles --create $(TMPFILESDIR)/softpart.conf; fi

# What `make install` put in place, but /etc/softpart/softpart.toml and
# /etc/softpart/nri.toml (your config) and /run/softpart (the homes of running tasks, gone at reboot).
# Stop the service first: `systemctl disable --now softpart`.
uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/scx_softpart $(DESTDIR)$(BINDIR)/softpart $(DESTDIR)$(BINDIR)/softpart-observe
	rm -f $(DESTDIR)$(BINDIR)/softpart-nri $(DESTDIR)$(UNITDIR)/softpart-nri.service
	rm -f $(DESTDIR)$(UNITDIR)/softpart.service $(DESTDIR)$(TMPFILESDIR)/softpart.conf
	rm -f $(DESTDIR)$(MANDIR)/man8/scx_softpart.8 $(DESTDIR)$(MANDIR)/man1/softpart*.1 $(DESTDIR)$(MANDIR)/man5/softpart.toml.5
	rm -f $(DESTDIR)$(BASHCOMPDIR)/softpart $(DESTDIR)$(ZSHCOMPDIR)/_softpart
	rm -rf $(DESTDIR)$(DOCDIR)
	if [ -z "$(DESTDIR)" ] && command -v systemctl >/dev/null; then systemctl daemon-reload; fi

build: setup
	$(ENV) cargo build --release --workspace --locked

# The summary on the terminal; every table in results/two-instances.txt,
# the figures in results/two-instances.svg.
demo: build
	$(ENV) target/release/softpart-bench run scenarios/two-instances.toml
	$(ENV) target/release/softpart-bench plot results/two-instances.json

# The soft-affinity and balancer experiment matrices and the side experiments (about 4 hours under TCG): results/experiments/.
experiments: build
	$(ENV) target/release/softpart-bench run scenarios/experiments/*.toml --out results/experiments

# The acceptance cells with an earlier build of scx_softpart beside today's,
# in one boot per topology (REV: a commit; scripts/build-rev.sh builds it):
#   make compare REV=COMMIT   (docs/results/shape-comparison.md names the one used)
# results/compare-REV/. About 80 minutes under TCG.
COMPARE_HOMES := scenarios/two-instances.toml $(addprefix scenarios/experiments/,two-hackbench.toml two-sysbench-threads.toml two-sysbench-memory.toml one-hackbench.toml one-sysbench-threads.toml one-sysbench-memory.toml overload-hackbench.toml reaction.toml)
COMPARE_BALANCE := $(addprefix scenarios/experiments/,balance-4-memory.toml balance-4-hackbench.toml balance-8-memory.toml balance-4-redis.toml)
compare: build
	@test -n "$(REV)" || { echo "make compare REV=COMMIT" >&2; exit 2; }
	$(ENV) bin=$$(bash scripts/build-rev.sh $(REV)) && export PATH="$$bin:$$PATH" && \
	  target/release/softpart-bench run $(COMPARE_HOMES) \
	    --policies "eevdf,softpart,external-homes:scx_softpart-$(REV)" --out results/compare-$(REV) && \
	  target/release/softpart-bench run $(COMPARE_BALANCE) \
	    --policies "softpart-nohome,softpart:--balance /bench/*,external-homes:scx_softpart-$(REV) --balance /bench/*" \
	    --out results/compare-$(REV)/balance

# What a halted vCPU's wake-up costs (about 45 minutes under TCG): the
# scenarios in scenarios/vcpu-wake/ on a 2-vCPU guest, once as it is and
# once with idle=poll; results/vcpu-wake/{halt,poll}/.
vcpu-wake: build
	$(ENV) target/release/softpart-bench run scenarios/vcpu-wake/*.toml --out results/vcpu-wake/halt
	$(ENV) target/release/softpart-bench run scenarios/vcpu-wake/*.toml --guest-arg idle=poll --out results/vcpu-wake/poll

# The run-delay cells under upstream scx_bpfland (built from
# crates.io by scripts/scx-bpfland.sh) beside eevdf and scx_softpart with
# and without homes, in one boot (about 40 minutes under TCG): is a gap
# scx_softpart's own, or any sched_ext scheduler's under TCG?
# results/upstream-baseline/.
UPSTREAM_SCENARIOS := $(addprefix scenarios/experiments/,one-sysbench-threads.toml one-hackbench.toml two-hackbench.toml two-sysbench-threads.toml)
upstream-baseline: build
	$(ENV) bpfland_bin=$$(bash scripts/scx-bpfland.sh) && PATH="$$bpfland_bin:$$PATH" \
	  target/release/softpart-bench run $(UPSTREAM_SCENARIOS) \
	  --policies "eevdf,softpart-nohome,softpart,external:scx_bpfland" --out results/upstream-baseline

# The soak run (about 35 minutes under TCG; not part of `make test`).
# KERNEL=linux-image-7.3.4+deb13-amd64 boots that guest kernel instead.
soak: build
	$(ENV) target/release/softpart-bench run scenarios/soak/*.toml $(if $(KERNEL),--kernel $(KERNEL)) --out results/soak

lint: setup
	$(ENV) cargo fmt --all -- --check
	$(ENV) cargo clippy --release --workspace --all-targets --locked -- -D warnings

unit: setup
	$(ENV) cargo test --release --workspace --locked

# The bench's guest tests, then the service as an operator installs it
# on Debian with systemd (scripts/systemd-test.sh).
guest-test: build
	$(ENV) target/release/softpart-bench test
	bash scripts/systemd-test.sh

test: lint unit guest-test
