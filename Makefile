# The two commands a new user needs (see README.md):
#   make demo   set up, build, and run the demo experiment in a guest
#   make test   set up, build, and run every test (unit + guest)
SHELL := /bin/bash
ENV := source scripts/env.sh &&

.PHONY: setup build demo test lint unit guest-test experiments soak vcpu-wake

setup:
	bash scripts/setup.sh

build: setup
	$(ENV) cargo build --release --workspace --locked

demo: build
	$(ENV) target/release/softpart-bench run scenarios/two-instances.toml

# Issues 3 and 4's experiment matrices and the side experiments (about 4 hours under TCG): results/experiments/.
experiments: build
	$(ENV) target/release/softpart-bench run scenarios/experiments/*.toml --out results/experiments

# What a halted vCPU's wake-up costs (about 45 minutes under TCG): the
# scenarios in scenarios/vcpu-wake/ on a 2-vCPU guest, once as it is and
# once with idle=poll; results/vcpu-wake/{halt,poll}/.
vcpu-wake: build
	$(ENV) target/release/softpart-bench run scenarios/vcpu-wake/*.toml --out results/vcpu-wake/halt
	$(ENV) target/release/softpart-bench run scenarios/vcpu-wake/*.toml --guest-arg idle=poll --out results/vcpu-wake/poll

# Issue 5's soak run (about 35 minutes under TCG; not part of `make test`).
# KERNEL=linux-image-7.3.4+deb13-amd64 boots that guest kernel instead.
soak: build
	$(ENV) target/release/softpart-bench run scenarios/soak/*.toml $(if $(KERNEL),--kernel $(KERNEL)) --out results/soak

lint: setup
	$(ENV) cargo fmt --all -- --check
	$(ENV) cargo clippy --release --workspace --all-targets --locked -- -D warnings

unit: setup
	$(ENV) cargo test --release --workspace --locked

guest-test: build
	$(ENV) target/release/softpart-bench test

test: lint unit guest-test
