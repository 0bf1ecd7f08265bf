# sqscope: see README.md. `make demo` and `make test` do all set-up.
SHELL := /bin/bash
GO ?= go
export PATH := $(PATH):/usr/local/go/bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
BIN := sqscope

# Debian packages the project needs to build, test and demo (chromium:
# the HTML report's test opens it in a headless browser; nodejs runs the
# pages' script on a small DOM).
DEB_PKGS := gcc make pkg-config clang llvm libbpf-dev bpftool \
	libibverbs-dev ibverbs-providers rdma-core tmux \
	qemu-system-x86 linux-image-amd64 busybox-static kmod iproute2 perftest xz-utils fish zsh bash-completion \
	protobuf-compiler prometheus chromium nodejs

.PHONY: all deps build test demo bench generate check-generate vet clean

all: build

deps:
	@missing=""; for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then scripts/apt-install $$missing; fi
	@command -v $(GO) >/dev/null || { echo "Go 1.26 or newer is needed (go not found on PATH)"; exit 1; }

build: deps
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/sqscope

# The generated packages: sqscope's BPF programs (bpf), the benchmark's
# (bpf/bench), and the Perfetto trace types (export/perfetto, from its
# proto/ files).
GEN_PKGS := ./bpf/ ./bpf/bench/ ./export/perfetto/
GENERATED = bpf/*_bpfel.go bpf/*_bpfel.o bpf/bench/*_bpfel.go bpf/bench/*_bpfel.o export/perfetto/*.pb.go

generate: deps
	$(GO) generate $(GEN_PKGS)

# Regenerate the BPF objects and the Perfetto types and fail when they
# differ from the tree.
check-generate: deps
	@if [ -f bpf/gen.go ]; then \
		before=$$(sha256sum $(GENERATED) 2>/dev/null); \
		$(GO) generate $(GEN_PKGS) || exit 1; \
		after=$$(sha256sum $(GENERATED) 2>/dev/null); \
		if [ "$$before" != "$$after" ]; then \
			echo "generated files are stale: run 'make generate' and commit bpf/, bpf/bench/ and export/perfetto/"; \
			diff <(echo "$$before") <(echo "$$after"); exit 1; \
		fi; \
	fi

vet: deps
	$(GO) vet ./...

# Tests that need root and BPF skip without them, except under
# SQSCOPE_REQUIRE_BPF=1 (CI), where they fail. A package's tests take 5
# minutes at most on a quiet host; the timeout leaves room for a host
# several times slower or busier (docs/testing.md).
test: deps check-generate vet build
	SQSCOPE_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 75m ./...

# The live view of the built-in workload: healthy, then one QP stops
# signaling and its send queue overflows. eBPF needs root.
demo: build
	@if [ "$$(id -u)" -ne 0 ]; then echo "sqscope demo traces with eBPF: running it with sudo"; exec sudo ./$(BIN) demo; fi; ./$(BIN) demo

# Every benchmark in one table, also written to BENCHMARKS.md with the
# machine and the commands (cmd/sqbench): probe overhead against empty
# uprobes and bpftrace, loss under load, and the go test benchmarks.
# Comparisons alternate their variants in one run. eBPF needs root.
bench: build
	@dpkg-query -W -f='$${Status}' bpftrace 2>/dev/null | grep -q "install ok installed" || scripts/apt-install bpftrace
	@d=$$(mktemp -d) && $(GO) build -o $$d/sqbench ./cmd/sqbench && { \
		if [ "$$(id -u)" -ne 0 ]; then echo "the probe benchmarks load eBPF: running sqbench with sudo"; SUDO=sudo; fi; \
		$$SUDO $$d/sqbench -sqscope ./$(BIN) -go "$$(command -v $(GO))" -o BENCHMARKS.md; rc=$$?; rm -rf $$d; exit $$rc; }

clean:
	rm -f $(BIN)
