# sqscope: see README.md. `make demo` and `make test` do all set-up.
SHELL := /bin/bash
GO ?= go
export PATH := $(PATH):/usr/local/go/bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
BIN := sqscope

# Debian packages the project needs to build, test and demo.
DEB_PKGS := gcc make pkg-config clang llvm libbpf-dev bpftool \
	libibverbs-dev ibverbs-providers rdma-core tmux

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

test: deps check-generate vet build
	$(GO) test -count=1 ./...

demo: build
	./$(BIN) workload -s 64 -I 64 -Q 16 -t 128 -n 1000000
	@echo
	./$(BIN) workload -s 64 -I 64 -t 128 -n 10000 --fault never-signal

bench: build
	$(GO) test -run '^$$' -bench BenchmarkSim ./workload/

clean:
	rm -f $(BIN)
