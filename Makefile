# weft: the two entry points are `make demo` (the main job) and `make test` (every test).
# Both install what they need on a fresh Debian machine and must be run as root.

SHELL := /bin/bash
CARGO ?= cargo
# Debian packages the build, the tests and the demo need (see docs/development.md).
APT_PACKAGES := clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev \
	iproute2 nftables iperf3 busybox-static jq iputils-ping \
	containernetworking-plugins containerd runc podman umoci gcc libc6-dev \
	protobuf-compiler ethtool
STAMP := target/.deps-installed

.PHONY: deps build release test demo lint fmt clean

deps: $(STAMP)

$(STAMP): Makefile
	@if [ "$$(id -u)" != 0 ]; then echo "make deps needs root (apt-get, namespaces, BPF)"; exit 1; fi
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi
	@mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
	@mkdir -p target && touch $(STAMP)

build: deps
	$(CARGO) build --locked --workspace --all-targets

release: deps
	$(CARGO) build --locked --release --bin weft

# Everything: formatting and lints first (cheap, and a red lint fails CI like a red test),
# then every test of every crate. Tests that need root, namespaces, BPF or the container
# runtimes are real tests and run here.
test: build
	@mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings
	$(CARGO) test --locked --workspace 2>&1 | tee target/test.log; exit $${PIPESTATUS[0]}

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings

demo: release
	./scripts/demo.sh

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
