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

clean:
	rm -rf $(BUILD) build-fuzz $(PLUGIN)

distclean: clean
	rm -rf $(VENV)
