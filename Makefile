# Set-up and everyday commands. `make run` and `make test` do all the set-up on a fresh machine.
#
# llama-cpp-python has no binary wheel on PyPI, so it is built from source once and the wheel is
# kept in a cache folder keyed by its version, CMAKE_ARGS and the patch scripts: pip's own wheel
# cache ignores CMAKE_ARGS, so a wheel built with other flags could silently be reused.
#
# One build serves the checkout (`make run`, `make test`), the package and `make gpu-test`: ggml's
# dynamic backends (GGML_BACKEND_DL), i.e. the CPU backend once per x86 micro-architecture level
# (GGML_CPU_ALL_VARIANTS, trimmed by packaging/llama_cpp_backends.py, which leaves out the AMX
# variant that crashed here) and the Vulkan backend, each its own library that the app loads at run
# time (sqale_desktop/core/engines/llama/backends.py): the best CPU kernels and a GPU when there is
# one, with no rebuild.  GGML_NATIVE=OFF: a native build crashes in ggml's AMX matmul on some CPUs.
# CUDA adds to it: make run CMAKE_ARGS="$(DEFAULT_CMAKE_ARGS) -DGGML_CUDA=on" (packaging/README.md).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LLAMA_VERSION := 0.3.36
DEFAULT_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DGGML_VULKAN=ON
CMAKE_ARGS ?= $(DEFAULT_CMAKE_ARGS)
BUILD_PATCHES := packaging/llama_cpp_backends.py packaging/llama_cpp_vulkan_compat.py
WHEEL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sqale-desktop/wheels
WHEEL_KEY := $(shell { printf '%s' "llama-cpp-python==$(LLAMA_VERSION)|$(CMAKE_ARGS)"; cat $(BUILD_PATCHES); } | sha256sum | cut -c1-16)
WHEEL_DIR := $(WHEEL_CACHE)/$(WHEEL_KEY)

# GPU backends: what each needs to build and run (Debian package names; README "GPU offload" lists
# the others).  `make gpu-test` runs the build on Mesa's software Vulkan driver (lavapipe), so every
# offload code path runs for real on a machine without a GPU.
VULKAN_BUILD_DEPS := libvulkan-dev glslc spirv-headers
VULKAN_RUN_DEPS := mesa-vulkan-drivers
# Installs Debian packages when they are missing: as root, or through sudo, or says what to install.
APT_INSTALL = if dpkg -s $(1) >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(1); \
	elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(1); \
	else echo "Install these packages first: $(1)"; exit 1; fi

.PHONY: run test lint typecheck pytest llama-wheel clean demo gpu-deps gpu-test package

run: $(VENV)/.installed
	$(BIN)/python -m sqale_desktop

test: $(VENV)/.test-installed
	$(BIN)/ruff check sqale_desktop tests benchmarks
	$(BIN)/ruff format --check sqale_desktop tests benchmarks
	$(BIN)/mypy sqale_desktop
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# The wheel is built from the unpacked sdist with the patch scripts applied (each says why):
# packaging/llama_cpp_backends.py (which CPU variants, and installing them into the wheel) and
# packaging/llama_cpp_vulkan_compat.py (Debian 12's Vulkan headers predate an extension ggml uses).
llama-wheel: $(VENV)/bin/python
	@if ! ls $(WHEEL_DIR)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
		echo "Building llama-cpp-python $(LLAMA_VERSION) with CMAKE_ARGS='$(CMAKE_ARGS)'"; \
		started=$$(date +%s) && \
		$(MAKE) --no-print-directory gpu-deps CMAKE_ARGS="$(CMAKE_ARGS)" && \
		rm -rf $(WHEEL_DIR).tmp $(WHEEL_DIR).src && mkdir -p $(WHEEL_DIR).tmp $(WHEEL_DIR).src && \
		$(BIN)/python -m pip download --no-deps --no-binary :all: -d $(WHEEL_DIR).src \
			"llama-cpp-python==$(LLAMA_VERSION)" && \
		tar xzf $(WHEEL_DIR).src/llama_cpp_python-$(LLAMA_VERSION).tar.gz -C $(WHEEL_DIR).src && \
		source="$(WHEEL_DIR).src/llama_cpp_python-$(LLAMA_VERSION)" && \
		$(BIN)/python packaging/llama_cpp_backends.py "$$source" && \
		$(BIN)/python packaging/llama_cpp_vulkan_compat.py "$$source" && \
		CMAKE_ARGS="$(CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$${CMAKE_BUILD_PARALLEL_LEVEL:-$$(nproc)} \
			$(BIN)/python -m pip wheel --no-deps --no-cache-dir -w $(WHEEL_DIR).tmp "$$source" && \
		rm -rf $(WHEEL_DIR) $(WHEEL_DIR).src && mv $(WHEEL_DIR).tmp $(WHEEL_DIR) && \
		echo "llama-cpp-python built in $$(( $$(date +%s) - started )) s"; \
	fi

# The build tools the chosen backend needs (CUDA and Metal toolchains are not apt packages).
gpu-deps:
	@case "$(CMAKE_ARGS)" in *GGML_VULKAN=[oO][nN]*) $(call APT_INSTALL,$(VULKAN_BUILD_DEPS)) ;; esac
	@case "$(CMAKE_ARGS)" in *GGML_CUDA=[oO][nN]*) command -v nvcc >/dev/null || \
		{ echo "CUDA: install NVIDIA's CUDA toolkit (nvcc on PATH)"; exit 1; } ;; esac

# The offload tests on lavapipe, with the app's own build: GGML_VK_VISIBLE_DEVICES=0 makes ggml use
# the software device, which it skips by default (it is slower than the CPU backend).
gpu-test: $(VENV)/.test-installed
	@$(call APT_INSTALL,$(VULKAN_RUN_DEPS))
	GGML_VK_VISIBLE_DEVICES=0 SQALE_DESKTOP_EXPECT_GPU=1 \
		$(BIN)/python -m pytest -p no:cacheprovider tests/core/engines/test_gpu_offload.py

# The stamp names the build flags, so `make run CMAKE_ARGS=...` with other flags installs that wheel.
$(VENV)/.llama-$(WHEEL_KEY): | $(VENV)/bin/python
	$(MAKE) llama-wheel
	$(BIN)/python -m pip install --force-reinstall --no-deps $(WHEEL_DIR)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	rm -f $(VENV)/.llama-* && touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.llama-$(WHEEL_KEY) | $(VENV)/bin/python
	$(BIN)/python -m pip install --find-links $(WHEEL_DIR) -e .
	touch $@

$(VENV)/.test-installed: $(VENV)/.installed
	$(BIN)/python -m pip install --find-links $(WHEEL_DIR) -e ".[test,reference]"
	touch $@

# The installable app (packaging/README.md): a PyInstaller folder dist/sqale-desktop/ carrying the
# llama.cpp build above (so CMAKE_ARGS' GPU flags travel), then on Linux a .tar.gz with install.sh
# and a .deb.  Build outputs stay under build/ and dist/.
package: $(VENV)/.package-installed
	$(BIN)/pyinstaller --noconfirm --log-level WARN --distpath dist --workpath build/pyinstaller \
		packaging/sqale-desktop.spec
	@if [ "$$(uname -s)" = Linux ]; then packaging/build-linux.sh dist/sqale-desktop; fi

$(VENV)/.package-installed: $(VENV)/.installed
	$(BIN)/python -m pip install --find-links $(WHEEL_DIR) -e ".[package]"
	touch $@

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
