# sqscope: see README.md. `make demo` and `make test` do all set-up.
SHELL := /bin/bash
GO ?= go
export PATH := $(PATH):/usr/local/go/bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
BIN := sqscope

# Debian packages the project needs to build, test and demo.
DEB_PKGS := gcc make pkg-config clang llvm libbpf-dev bpftool \
	libibverbs-dev ibverbs-providers rdma-core tmux \
	qemu-system-x86 linux-image-amd64 busybox-static kmod iproute2 perftest xz-utils

.PHONY: all deps build test demo bench generate check-generate vet clean

all: build

deps:
	@missing=""; for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v $(GO) >/dev/null || { echo "Go 1.26 or newer is needed (go not found on PATH)"; exit 1; }

build: deps
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/sqscope

generate: deps
	$(GO) generate ./bpf/

# Regenerate the BPF objects and fail when they differ from the tree.
check-generate: deps
	@if [ -f bpf/gen.go ]; then \
		before=$$(sha256sum bpf/*_bpfel.go bpf/*_bpfel.o 2>/dev/null); \
		$(GO) generate ./bpf/ || exit 1; \
		after=$$(sha256sum bpf/*_bpfel.go bpf/*_bpfel.o 2>/dev/null); \
		if [ "$$before" != "$$after" ]; then \
			echo "generated files are stale: run 'make generate' and commit bpf/"; \
			diff <(echo "$$before") <(echo "$$after"); exit 1; \
		fi; \
	fi

vet: deps
	$(GO) vet ./...

# Tests that need root and BPF skip without them, except under
# SQSCOPE_REQUIRE_BPF=1 (CI), where they fail.
test: deps check-generate vet build
	SQSCOPE_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 20m ./...

# The live view of the built-in workload: healthy, then one QP stops
# signaling and its send queue overflows. eBPF needs root.
demo: build
	@if [ "$$(id -u)" -ne 0 ]; then echo "sqscope demo traces with eBPF: running it with sudo"; exec sudo ./$(BIN) demo; fi; ./$(BIN) demo

# Every benchmark; comparisons are ratios measured side by side in one run.
bench: build
	@echo "== untraced simulator throughput, one QP (WR/s)"
	@$(GO) test -run '^$$' -bench BenchmarkSim ./workload/ | grep -E '^Benchmark'
	@echo "== analyzer ingest, synthetic stream, one core"
	@$(GO) test -run '^$$' -bench BenchmarkIngest ./analyzer/ | grep -E '^Benchmark'
	@echo "== recording size (bytes per WR) and analyzer ingest from a recording (needs root)"
	@$(GO) test -run '^$$' -bench BenchmarkRecording ./cmd/sqscope/ | grep -E '^Benchmark|SKIP|skip'
	@echo "== TUI CPU at 10 Hz with 64 QPs (% of one core; target < 5)"
	@$(GO) test -run '^$$' -bench BenchmarkTUICPU -benchtime 1x ./tui/ | grep -E '^Benchmark'
	@echo "== probe cost per traced post+poll (needs root)"
	@$(GO) test -run '^$$' -bench ProbeOverhead -benchtime 1x ./probe/ | grep -E '^Benchmark|SKIP|skip'

clean:
	rm -f $(BIN)
