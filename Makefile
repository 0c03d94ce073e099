# jax-mlx: `make demo` and `make test` do everything on a fresh clone (venv, deps, build, run).
#
# Variables (override on the command line):
#   PYTHON       interpreter that creates the venv           (default: python3)
#   VENV         the virtual environment                     (default: .venv)
#   JAX_VERSION  install this jax/jaxlib instead of the pin  (compatibility checks, e.g. 0.11.2
#                with PYTHON=python3.12 VENV=.venv-0.11.2)
#   BUILD        CMake build directory                       (default: build)
#   JOBS         parallel build jobs                         (default: 2)

PYTHON ?= python3
VENV ?= .venv
BUILD ?= build
JOBS ?= 2
JAX_VERSION ?=
FUZZ_SECONDS ?= 60

UNAME := $(shell uname -s)
ifeq ($(UNAME),Darwin)
  REQUIREMENTS := requirements-macos.txt
  PLUGIN_LIB := libjax_mlx_pjrt.so
else
  REQUIREMENTS := requirements-linux.txt
  PLUGIN_LIB := libjax_mlx_pjrt.so
endif

VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PLUGIN := python/jax_plugins/mlx/$(PLUGIN_LIB)

.PHONY: all venv build demo test test-cpp test-py fuzz bench clean distclean

all: build

# The venv is (re)made when the pins change. The .pth file puts python/ on sys.path so jax finds
# jax_plugins.mlx without an install step.
$(STAMP): $(REQUIREMENTS)
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r $(REQUIREMENTS)
	@if [ -n "$(JAX_VERSION)" ]; then \
	  $(VPY) -m pip install --quiet "jax==$(JAX_VERSION)" "jaxlib==$(JAX_VERSION)"; fi
	$(VPY) -c "import site, pathlib; pathlib.Path(site.getsitepackages()[0], 'jax_mlx_dev.pth').write_text('$(CURDIR)/python\n')"
	touch $@

venv: $(STAMP)

MLX_ROOT = $(shell $(VPY) -c "import mlx, os; print(os.path.dirname(mlx.__file__) if mlx.__file__ else list(mlx.__path__)[0])")

$(BUILD)/CMakeCache.txt: $(STAMP)
	cmake -S . -B $(BUILD) -DMLX_ROOT=$(MLX_ROOT) -DPython_EXECUTABLE=$(abspath $(VPY))

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(VPY) examples/demo.py

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)
	$(VPY) -m pytest -q tests
	JAXMLX_FUZZ_SECONDS=$(FUZZ_SECONDS) $(MAKE) fuzz

test-cpp: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-py: build
	$(VPY) -m pytest -q tests

# libFuzzer (clang) build of the artifact reader, run for FUZZ_SECONDS.
fuzz: $(STAMP)
	bash scripts/fuzz_reader.sh $(FUZZ_SECONDS)

bench: build
	$(VPY) bench/run.py $(BENCH_ARGS)

# Soak benchmark (issue #7): 100,000 training steps + 10,000 compilations; RSS/threads/fds plot.
soak: build
	$(VPY) bench/soak.py $(SOAK_ARGS)

# ---- Sanitizers (issue #7) ----------------------------------------------------------------------
# make asan: AddressSanitizer + UndefinedBehaviorSanitizer build in $(ASAN_BUILD), its ctest, then
#   the Python tests $(ASAN_PYTESTS) against that build's plugin.
# make tsan: ThreadSanitizer build in $(TSAN_BUILD) of the worker/event/buffer/executable/governor
#   tests (src/runtime/*_test.cc) and the PJRT client test, run under it.
# Findings inside MLX, jaxlib or CPython (never ours) are suppressed in scripts/sanitizers/, each
# entry with its reason. A sanitizer build never copies its plugin into python/jax_plugins/mlx.
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
# The program-level tests by default (PJRT boundary, buffers, callbacks, memory, programs, random);
# ASAN_PYTESTS=tests runs the whole suite (35 min on 2 cores; clean at stops 12 and 50).
ASAN_PYTESTS ?= $(wildcard tests/test_*.py)
TSAN_TESTS := runtime_test executable_test memory_governor_test pjrt_client_test
SAN_DIR := $(CURDIR)/scripts/sanitizers
LIBASAN = $(shell $(CXX) -print-file-name=libasan.so)
LIBSTDCXX = $(shell $(CXX) -print-file-name=libstdc++.so.6)
# Every sanitizer stops at its first report and prints a stack for it.
UBSAN_ENV := UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$(SAN_DIR)/ubsan.supp
# ctest: the instrumented C++ tests, leak checking on (LSan), MLX's own leaks suppressed.
#   allocator_may_return_null=1: the 1 TB allocation tests expect std::bad_alloc from operator
#   new/MLX's malloc, as without ASan, not ASan's "allocation-size-too-big" abort.
ASAN_CTEST_ENV := ASAN_OPTIONS=allocator_may_return_null=1:detect_stack_use_after_return=1 \
  LSAN_OPTIONS=suppressions=$(SAN_DIR)/lsan.supp $(UBSAN_ENV)
# Python is not instrumented, so ASan's runtime is preloaded as the process's first library (else
# the plugin refuses to load: "ASan runtime does not come first in initial library list").
# libstdc++ is preloaded with it: python does not link it, so at ASan's start-up its __cxa_throw
# interceptor finds no real __cxa_throw, and the first C++ exception anywhere (jaxlib probes
# plugins by throwing) aborts with "CHECK failed: ... real___cxa_throw != 0".
#   detect_leaks=0: CPython, jaxlib and MLX keep objects until exit on purpose (thousands of
#     reports, none ours); our code's leaks are what the ctest binaries above check.
#   allocator_may_return_null=1: as for ctest (tests/test_memory.py asks for 1 TB).
# tests/test_malformed_programs.py runs this build's jaxmlx-mutate-compile: out-of-bounds reads and
# integer overflows that malformed attributes cause are reports here, not silent as without ASan.
# JAXMLX_TEST_SANITIZER_BUILD=1: tests that compare our fused kernels with MLX's bit for bit let a
# two-NaN op's NaN be either operand's (tests/ops/test_cpu_fusion.py says why).
ASAN_PY_ENV = LD_PRELOAD="$(LIBASAN) $(LIBSTDCXX)" \
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 $(UBSAN_ENV) \
  JAX_MLX_LIBRARY_PATH=$(CURDIR)/$(ASAN_BUILD)/src/pjrt/libjax_mlx_pjrt.so \
  JAXMLX_MUTATE_TOOL=$(CURDIR)/$(ASAN_BUILD)/tools/jaxmlx-mutate-compile \
  JAXMLX_TEST_SANITIZER_BUILD=1
TSAN_ENV := TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(SAN_DIR)/tsan.supp

.PHONY: soak asan tsan
$(ASAN_BUILD)/CMakeCache.txt: $(STAMP)
	cmake -S . -B $(ASAN_BUILD) -DMLX_ROOT=$(MLX_ROOT) -DPython_EXECUTABLE=$(abspath $(VPY)) \
	  -DJAXMLX_SANITIZE=address,undefined

$(TSAN_BUILD)/CMakeCache.txt: $(STAMP)
	cmake -S . -B $(TSAN_BUILD) -DMLX_ROOT=$(MLX_ROOT) -DPython_EXECUTABLE=$(abspath $(VPY)) \
	  -DJAXMLX_SANITIZE=thread

asan: $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && $(ASAN_CTEST_ENV) ctest --output-on-failure -j$(JOBS)
	$(ASAN_PY_ENV) $(VPY) -m pytest -q -p no:cacheprovider $(ASAN_PYTESTS)

tsan: $(TSAN_BUILD)/CMakeCache.txt
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target $(TSAN_TESTS)
	cd $(TSAN_BUILD) && $(TSAN_ENV) ctest --output-on-failure -j$(JOBS) \
	  -R '^($(subst $(eval) ,|,$(strip $(TSAN_TESTS))))$$'

clean:
	rm -rf $(BUILD) build-fuzz $(PLUGIN)

distclean: clean
	rm -rf $(VENV)
