# SPDX-License-Identifier: Apache-2.0
# The README's two commands live here: `make demo` (one small program carried
# through the modes, examples/tally) and `make test` (every test, under 15 minutes on
# 2 cores). Both run scripts/setup.sh first, which installs what is missing.
# Longer work has its own targets: `make bench`, `make crashtest-full`
# (`make crashtest-quick`, the benchmark workloads' crash tests, also runs in
# `make test`, beside the CLI tests), `make test-real` (programs from Debian's
# source packages built with pmkit; a quick subset runs in `make test`),
# `make fuzz` (each libFuzzer target of fuzz/ for FUZZ_SECONDS, 10 minutes;
# `make test` runs them for 20 seconds each).

SHELL := /bin/bash
VENV := $(CURDIR)/.venv/bin
BUILD := build
ASAN_BUILD := build-asan
CLANG_FORMAT := clang-format-16
C_SOURCES = $(shell git ls-files '*.c' '*.h' '*.cpp' 2>/dev/null)

.PHONY: all setup build demo test test-runtime test-asan test-passes test-cli test-cli-fuzz \
        lint format bench crashtest-quick crashtest-full test-real install clean \
        fuzz test-fuzz fuzz-run

all: build

setup:
	@scripts/setup.sh --no-build

build:
	@scripts/setup.sh

demo: build
	$(VENV)/pmkit demo

# (The lit tests run inside test-runtime, as the CTest test pmkit-passes-lit,
# beside the crash tests; test-passes runs them alone.)
test: build
	@$(MAKE) --no-print-directory lint test-runtime test-asan test-cli-fuzz
	@echo "make test: all passed"

# The CLI tests keep about one core busy: the fuzzers, then the benchmark
# workloads' quick crash tests (bench.crashtest-quick, one workload at a time),
# then the real programs' quick subset (tests/real) run beside them, niced, on
# the other; their reports follow the tests'.
test-cli-fuzz:
	@mkdir -p $(BUILD)/fuzz; t0=$$(date +%s); lane=$(BUILD)/fuzz/lane-times.out; \
	( $(MAKE) --no-print-directory test-fuzz >$(BUILD)/fuzz/test-fuzz.out 2>&1; \
	  f=$$?; echo "test-cli-fuzz: fuzzers done after $$(( $$(date +%s) - t0 )) s" >$$lane; \
	  nice -n 10 $(VENV)/python bench/crashtest.py --build-dir $(BUILD) --jobs 1 \
	    >$(BUILD)/fuzz/crashtest-quick.out 2>&1 || f=1; \
	  echo "test-cli-fuzz: quick crash tests done after $$(( $$(date +%s) - t0 )) s" >>$$lane; \
	  nice -n 10 $(VENV)/python tests/real/realtier.py --quick \
	    >$(BUILD)/fuzz/real-quick.out 2>&1 || f=1; \
	  echo "test-cli-fuzz: real programs done after $$(( $$(date +%s) - t0 )) s" >>$$lane; \
	  exit $$f ) & fz=$$!; \
	$(MAKE) --no-print-directory test-cli; cli=$$?; \
	echo "test-cli-fuzz: CLI tests done after $$(( $$(date +%s) - t0 )) s"; \
	wait $$fz; fuzz=$$?; \
	cat $(BUILD)/fuzz/test-fuzz.out $(BUILD)/fuzz/crashtest-quick.out $(BUILD)/fuzz/real-quick.out \
	  $$lane; \
	test $$cli = 0 && test $$fuzz = 0

# bench.crashtest-quick runs beside the CLI tests (test-cli-fuzz).
test-runtime:
	cd $(BUILD) && ctest --output-on-failure -j2 -E '^bench\.crashtest-quick$$'

# The runtime and its tests again under AddressSanitizer + UBSan.
test-asan:
	@if [ ! -f $(ASAN_BUILD)/build.ninja ]; then \
	  cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	    -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 \
	    -DPMKIT_SANITIZE=ON -DPMKIT_BUILD_PASSES=OFF -DPMKIT_BUILD_BENCH=OFF \
	    -DPMKIT_BUILD_EXAMPLES=ON >/dev/null; fi
	cmake --build $(ASAN_BUILD)
	cd $(ASAN_BUILD) && PMKIT_TEST_QUICK=1 ASAN_OPTIONS=detect_leaks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j2

test-passes:
	$(VENV)/lit -sv $(BUILD)/tests/passes

test-cli:
	$(VENV)/python -m pytest -q tests/cli

lint:
	$(CLANG_FORMAT) --dry-run --Werror $(C_SOURCES)
	$(VENV)/ruff check cli tests bench scripts
	$(VENV)/ruff format --check cli tests bench scripts

format:
	$(CLANG_FORMAT) -i $(C_SOURCES)
	$(VENV)/ruff format cli tests bench scripts

# Every section of docs/results.md in one run, on this machine, of one commit (refused with
# uncommitted changes; BENCH_ALLOW_DIRTY=1 measures them and says so): the results of earlier
# runs are removed first (git has them), so the report cannot mix runs. About 100 minutes on
# 2 cores, the real-program tier included; nothing else should run meanwhile.
bench: build
	$(VENV)/python bench/run.py --check-clean
	rm -f bench/results/*.json
	$(VENV)/python bench/run.py alloc trace explore
	$(VENV)/python bench/suite.py --scale full
	$(VENV)/python bench/suite.py --name robust --variants hand-adr,robust,robust-opt,robust-flit --scale full --repeat 3
	$(VENV)/python bench/robust_stats.py
	$(VENV)/python bench/suite.py --name clobber --suite ds,tx --variants pmdk,hand-adr,hand-eadr,undo-adr,clobber-adr,undo-eadr,clobber-eadr --scale full --repeat 3 --threads 1,2
	$(VENV)/python bench/suite.py --name ssapp --suite ds,tx,lf --variants volatile,hand-eadr,pmdk,clobber-eadr,ssapp,ssapp-compiler --scale full --repeat 3 --threads 1,2
	$(VENV)/python bench/ssapp_insns.py
	$(VENV)/python bench/run.py wppmicro wpprestart wppvacation kvserver
	$(VENV)/python bench/run.py arp
	$(VENV)/python bench/arp/simulate.py
	$(VENV)/python tests/real/realtier.py --results --json $(BUILD)/real-results.json; \
	  s=$$?; $(VENV)/python bench/report.py && exit $$s

# Longer crash campaigns: 20000 random kills of the allocator workload and
# every crash point of the key-value store's workload (about 10 minutes).
crashtest-quick: build
	$(VENV)/python bench/crashtest.py --build-dir $(BUILD)

# Programs from Debian's source packages (tests/real/realtier.py: fetched into
# .cache/debsrc through the project's own apt configuration, built with pmkit,
# checked); `make test` runs the quick subset.
test-real: build
	$(VENV)/python tests/real/realtier.py --results --json $(BUILD)/real-results.json
	$(VENV)/python bench/report.py

crashtest-full: build
	cd $(BUILD) && PMKIT_CRASH_TRIALS=20000 PMKIT_CRASH_SECONDS=1800 \
	  ctest --output-on-failure -R runtime.alloc_crash
	MAX_POINTS=100000 SEEDS=50 examples/kvstore/crashtest.sh $(BUILD)
	$(VENV)/python bench/crashtest.py --build-dir $(BUILD) --full
	$(VENV)/python tests/cli/wppgolden.py --trials 200

# The libFuzzer targets (fuzz/), side by side on one core each, on
# fuzz/corpus/<target> (the committed seeds) plus what earlier runs found in
# $(BUILD)/fuzz/work/<target>. A crash, a hang (-timeout) or a leak fails the
# target; its input is saved as $(BUILD)/fuzz/<target>-crash-*, its log is
# $(BUILD)/fuzz/<target>.log.
FUZZ_SECONDS ?= 600
FUZZ_TARGETS := trace_reader sim_input pool_open
FUZZ_FLAGS := -rss_limit_mb=2048 -max_len=32768 -timeout=10 -print_final_stats=1

fuzz: build
	@$(MAKE) --no-print-directory fuzz-run FUZZ_RUN_SECONDS=$(FUZZ_SECONDS)

test-fuzz:
	@$(MAKE) --no-print-directory fuzz-run FUZZ_RUN_SECONDS=20 FUZZ_POOL_SECONDS=60

fuzz-run:
	@set -e; out=$(abspath $(BUILD))/fuzz; pids=""; \
	for t in $(FUZZ_TARGETS); do \
	  bin=$$out/fuzz-$${t//_/-}; \
	  if [ ! -x $$bin ]; then \
	    echo "fuzz: $$bin is not built (PMKIT_BUILD_FUZZ: clang with libFuzzer)"; exit 1; fi; \
	  mkdir -p $$out/work/$$t; \
	  secs=$(FUZZ_RUN_SECONDS); \
	  if [ $$t = pool_open ]; then secs=$(or $(FUZZ_POOL_SECONDS),$(FUZZ_RUN_SECONDS)); fi; \
	  echo "fuzz: $$t for $$secs s"; \
	  (cd $$out && nice -n 19 $$bin $(FUZZ_FLAGS) -max_total_time=$$secs \
	     -artifact_prefix=$$out/$$t- $$out/work/$$t $(CURDIR)/fuzz/corpus/$$t \
	     >$$out/$$t.log 2>&1) & pids="$$pids $$!"; \
	done; \
	failed=0; set -- $$pids; \
	for t in $(FUZZ_TARGETS); do \
	  if wait $$1; then \
	    grep -E '^stat::number_of_executed_units|^Done [0-9]+ runs' $$out/$$t.log \
	      | sed "s/^/fuzz: $$t: /"; \
	  else \
	    tail -n 40 $$out/$$t.log; echo "fuzz: $$t FAILED (log: $$out/$$t.log)"; failed=1; fi; \
	  shift; \
	done; \
	exit $$failed

# `make install PREFIX=DIR` (default /usr/local): what an installed pmkit needs,
# built alone (not the tests, benchmarks or fuzzers) with at most one job per
# core, then installed; DIR/bin/pmkit works from DIR alone.
PREFIX ?= /usr/local
install:
	@scripts/setup.sh --configure-only
	cmake --build $(BUILD) --target pmkit-installable -j $$(nproc)
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
