# ruff: noqa: E501  (the C++ lines below must match llama.cpp's source byte for byte)
"""Let llama-cpp-python's vendored llama.cpp build its Vulkan backend against older Vulkan headers.

ggml-vulkan chains a ``VkLayerSettingsCreateInfoEXT`` into instance creation unconditionally, to
switch on the validation layer's best-practice checks when ``GGML_VK_VALIDATE`` asks for them.
That struct arrived with VK_EXT_layer_settings in Vulkan headers 1.3.261; Debian 12 ships 1.3.239
(``libvulkan-dev``), so the backend does not compile there.  This guards the chain with the
extension's own ``#if defined(VK_EXT_layer_settings)`` and creates the instance without it
otherwise: a no-op where the headers are new enough, and on older ones only the validation
settings are lost (the validation layer itself is still enabled when asked for).

Usage: ``python packaging/llama_cpp_vulkan_compat.py UNPACKED_SDIST_FOLDER`` (the Makefile's
Vulkan wheel build runs it).  It refuses, loudly, a source it does not recognise.
"""

from __future__ import annotations

import sys
from pathlib import Path

SOURCE = Path("vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp")
ORIGINAL = """    VkBool32 enable_best_practice = layer_settings;
    std::vector<vk::LayerSettingEXT> settings = {
        {
            "VK_LAYER_KHRONOS_validation",
            "validate_best_practices",
            vk::LayerSettingTypeEXT::eBool32,
            1,
            &enable_best_practice
        },
    };
    vk::LayerSettingsCreateInfoEXT layer_setting_info(settings);
    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions, &layer_setting_info);
"""
GUARDED = (
    "#if defined(VK_EXT_layer_settings)\n"
    + ORIGINAL
    + "#else\n"
    + "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);\n"
    + "#endif\n"
)


def patch(root: Path) -> str:
    """Apply the guard under ``root``; returns what was done."""
    path = root / SOURCE
    text = path.read_text(encoding="utf-8")
    if GUARDED in text:
        return f"{path}: already guarded"
    if text.count(ORIGINAL) != 1:
        raise SystemExit(f"{path}: the layer-settings block was not found once; update this script")
    path.write_text(text.replace(ORIGINAL, GUARDED), encoding="utf-8")
    return f"{path}: VK_EXT_layer_settings use guarded"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(patch(Path(sys.argv[1])))
