#!/bin/bash
# The GPU check on a lent machine, over the wheels packaging/device-kit.sh put in .devcarry/:
# which backends and devices the app finds, the offload tests on the real driver (a missing device
# fails them), and benchmarks/gpu.py on the small and the 2B shape. Figures and logs go to $OUT.
# SmolLM2's GGUF (a PyPI package too large to carry) is left out: the tests that set it up are
# deselected (SMOLLM2_TESTS).
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/device-check}"; mkdir -p "$out"
if ! ldconfig -p | grep -q libvulkan.so.1; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES="$icd"
python3 -m pip install -q --no-index --no-deps --target /tmp/kit .devcarry/*.whl
export PYTHONPATH="/tmp/kit:$PWD" PYTHONUNBUFFERED=1 SQALE_DESKTOP_HOME=/tmp/sqale-home
python3 - <<'PY' 2>&1 | tee "$out/facts.txt"
from sqale_desktop.core.engines.llama import backends, gpu
print("backends:", gpu.describe_backends(backends.load_backends()))
print("offload:", gpu.gpu_offload())
print("devices:", gpu.known_gpus())
PY
SMOLLM2_TESTS="smollm2 or attention_model or cannot_offload or match_the_cpu_build"
SQALE_DESKTOP_EXPECT_GPU=1 timeout 200 python3 -m pytest -p no:cacheprovider -q -rA -k "not ($SMOLLM2_TESTS)" \
    tests/core/engines/test_gpu_offload.py tests/core/engines/test_backends_probe.py \
    tests/core/engines/test_gpu.py tests/core/engines/test_device_choice.py >"$out/tests.txt" 2>&1
echo "tests: exit $?"; tail -1 "$out/tests.txt"
timeout 90 python3 benchmarks/gpu.py --quick >"$out/gpu_quick.txt" 2>&1; echo "gpu.py --quick: exit $?"
timeout 330 python3 benchmarks/gpu.py >"$out/gpu_2b.txt" 2>&1; echo "gpu.py: exit $?"
tail -n 6 "$out/gpu_quick.txt" "$out/gpu_2b.txt"
