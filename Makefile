# Set-up and everyday commands. `make run` and `make test` do all the set-up on a fresh machine.
#
# llama-cpp-python has no binary wheel on PyPI, so it is built from source once (5-6 minutes on
# 2 cores) and the wheel is kept in a cache folder keyed by its version and CMAKE_ARGS: pip's own
# wheel cache ignores CMAKE_ARGS, so a CPU wheel could silently be reused for a GPU build (or a
# native one for a portable one).  The default is portable: GGML_NATIVE=OFF, because a native build
# crashes in ggml's AMX matmul on some CPUs.  GPU users: make run CMAKE_ARGS="-DGGML_CUDA=on".

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LLAMA_VERSION := 0.3.36
CMAKE_ARGS ?= -DGGML_NATIVE=OFF
WHEEL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sqale-desktop/wheels
WHEEL_KEY := $(shell printf '%s' "llama-cpp-python==$(LLAMA_VERSION)|$(CMAKE_ARGS)" | sha256sum | cut -c1-16)
WHEEL_DIR := $(WHEEL_CACHE)/$(WHEEL_KEY)

.PHONY: run test lint typecheck pytest llama-wheel clean demo

run: $(VENV)/.installed
	$(BIN)/python -m sqale_desktop

test: $(VENV)/.test-installed
	$(BIN)/ruff check sqale_desktop tests benchmarks
	$(BIN)/mypy sqale_desktop/core
	$(BIN)/python -m pytest

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

llama-wheel: $(VENV)/bin/python
	@if ! ls $(WHEEL_DIR)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
		echo "Building llama-cpp-python $(LLAMA_VERSION) with CMAKE_ARGS='$(CMAKE_ARGS)' (about 5 minutes)"; \
		mkdir -p $(WHEEL_DIR).tmp && \
		CMAKE_ARGS="$(CMAKE_ARGS)" $(BIN)/python -m pip wheel --no-deps --no-cache-dir \
			-w $(WHEEL_DIR).tmp "llama-cpp-python==$(LLAMA_VERSION)" && \
		rm -rf $(WHEEL_DIR) && mv $(WHEEL_DIR).tmp $(WHEEL_DIR); \
	fi

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(MAKE) llama-wheel
	$(BIN)/python -m pip install --force-reinstall --no-deps $(WHEEL_DIR)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	$(BIN)/python -m pip install --find-links $(WHEEL_DIR) -e .
	touch $@

$(VENV)/.test-installed: $(VENV)/.installed
	$(BIN)/python -m pip install --find-links $(WHEEL_DIR) -e ".[test,reference]"
	touch $@

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
