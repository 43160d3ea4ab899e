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

# GPU backends: what each needs to build (Debian package names; README "GPU offload" lists the
# others).  The Vulkan wheel is also what `make gpu-test` runs on Mesa's software Vulkan driver
# (lavapipe), so every offload code path runs for real on a machine without a GPU.
VULKAN_BUILD_DEPS := libvulkan-dev glslc spirv-headers
VULKAN_RUN_DEPS := mesa-vulkan-drivers
VULKAN_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_VULKAN=on
VULKAN_KEY := $(shell printf '%s' "llama-cpp-python==$(LLAMA_VERSION)|$(VULKAN_CMAKE_ARGS)" | sha256sum | cut -c1-16)
VULKAN_LIB := $(WHEEL_CACHE)/$(VULKAN_KEY)/lib
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
	$(BIN)/mypy sqale_desktop
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# A Vulkan build is made from the unpacked sdist with packaging/llama_cpp_vulkan_compat.py applied
# (Debian 12's Vulkan headers predate an extension ggml-vulkan uses; the script says why).
llama-wheel: $(VENV)/bin/python
	@if ! ls $(WHEEL_DIR)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
		echo "Building llama-cpp-python $(LLAMA_VERSION) with CMAKE_ARGS='$(CMAKE_ARGS)' (about 5 minutes)"; \
		rm -rf $(WHEEL_DIR).tmp $(WHEEL_DIR).src && mkdir -p $(WHEEL_DIR).tmp && \
		case "$(CMAKE_ARGS)" in \
		*GGML_VULKAN=[oO][nN]*) \
			$(MAKE) --no-print-directory gpu-deps CMAKE_ARGS="$(CMAKE_ARGS)" && \
			mkdir -p $(WHEEL_DIR).src && \
			$(BIN)/python -m pip download --no-deps --no-binary :all: -d $(WHEEL_DIR).src \
				"llama-cpp-python==$(LLAMA_VERSION)" && \
			tar xzf $(WHEEL_DIR).src/llama_cpp_python-$(LLAMA_VERSION).tar.gz -C $(WHEEL_DIR).src && \
			$(BIN)/python packaging/llama_cpp_vulkan_compat.py $(WHEEL_DIR).src/llama_cpp_python-$(LLAMA_VERSION) && \
			source="$(WHEEL_DIR).src/llama_cpp_python-$(LLAMA_VERSION)" ;; \
		*) source="llama-cpp-python==$(LLAMA_VERSION)" ;; \
		esac && \
		CMAKE_ARGS="$(CMAKE_ARGS)" $(BIN)/python -m pip wheel --no-deps --no-cache-dir \
			-w $(WHEEL_DIR).tmp "$$source" && \
		rm -rf $(WHEEL_DIR) $(WHEEL_DIR).src && mv $(WHEEL_DIR).tmp $(WHEEL_DIR); \
	fi

# The build tools the chosen backend needs (CUDA and Metal toolchains are not apt packages).
gpu-deps:
	@case "$(CMAKE_ARGS)" in \
	*GGML_VULKAN=[oO][nN]*) $(call APT_INSTALL,$(VULKAN_BUILD_DEPS)) ;; \
	*GGML_CUDA=[oO][nN]*) command -v nvcc >/dev/null || { echo "CUDA: install NVIDIA's CUDA toolkit (nvcc on PATH)"; exit 1; } ;; \
	*) echo "gpu-deps: nothing to install for CMAKE_ARGS='$(CMAKE_ARGS)'" ;; \
	esac

# The offload tests on the Vulkan build, run on lavapipe: the Vulkan wheel's libraries are loaded in
# place of the CPU build's (LLAMA_CPP_LIB_PATH, llama-cpp-python's own override), and
# GGML_VK_VISIBLE_DEVICES=0 makes ggml use the software device, which it skips by default.
$(VULKAN_LIB)/.extracted: | $(VENV)/bin/python
	$(MAKE) --no-print-directory llama-wheel CMAKE_ARGS="$(VULKAN_CMAKE_ARGS)"
	rm -rf $(VULKAN_LIB) && mkdir -p $(VULKAN_LIB)
	$(BIN)/python -c "import sys, zipfile, pathlib; w = zipfile.ZipFile(next(pathlib.Path(sys.argv[1]).glob('*.whl'))); \
		[pathlib.Path(sys.argv[2], pathlib.PurePosixPath(n).name).write_bytes(w.read(n)) for n in w.namelist() \
		 if n.startswith('llama_cpp/lib/') and not n.endswith('/')]" $(dir $(VULKAN_LIB)) $(VULKAN_LIB)
	touch $@

gpu-test: $(VENV)/.test-installed $(VULKAN_LIB)/.extracted
	@$(call APT_INSTALL,$(VULKAN_RUN_DEPS))
	LLAMA_CPP_LIB_PATH=$(VULKAN_LIB) GGML_VK_VISIBLE_DEVICES=0 SQALE_DESKTOP_EXPECT_GPU=1 \
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
