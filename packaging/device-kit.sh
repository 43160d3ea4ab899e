#!/bin/bash
# Prepares what a lent GPU machine (the `device` tool) needs to run the app's own llama.cpp build:
# that machine reaches no package index, so the wheels travel with the working tree.
#
#   packaging/device-kit.sh [PYTHON_VERSION]     # the lent machine's Python, default 3.12
#
# Writes .devcarry/ (the cached llama-cpp-python wheel of `make run`, and the pure or manylinux
# wheels the GPU tests and benchmarks import, for that Python; numpy is the machine's own) and
# .gl/ (the Vulkan loader, which the lent machine lacks), both ignored by git. Then run
# packaging/device-check.sh there with carry [".devcarry", ".gl"] (about 55 MiB of the 64 allowed).
set -euo pipefail
cd "$(dirname "$0")/.."
py="${1:-3.12}"
exclude="$(git rev-parse --git-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")" .devcarry .gl
grep -qx '/.devcarry/' "$exclude" 2>/dev/null || echo /.devcarry/ >>"$exclude"
grep -qx '/.gl/' "$exclude" 2>/dev/null || echo /.gl/ >>"$exclude"
wheel=$(ls ~/.cache/sqale-desktop/wheels/*/llama_cpp_python-*.whl | head -1)  # built by `make run`
cp "$wheel" .devcarry/
.venv/bin/pip download -q --no-deps --only-binary=:all: --python-version "$py" \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    -d .devcarry diskcache jinja2 markupsafe typing_extensions gguf pyyaml tqdm requests urllib3 \
    charset_normalizer certifi idna platformdirs filelock pytest pluggy iniconfig packaging pygments \
    trustme cryptography cffi pycparser anyio sniffio
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
mkdir -p /tmp/amd64/partial
apt-get $o update -qq
(cd .gl && apt-get $o download libvulkan1)
du -sh .devcarry .gl
