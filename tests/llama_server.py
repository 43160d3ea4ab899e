"""``python -m tests.llama_server ARGS``: llama-cpp-python's own server, on the app's build.

The app's llama.cpp has dynamic backends, which llama-cpp-python never loads
(abetlen/llama-cpp-python#2069: its server then fails with "no backends are loaded"); this
registers them as the app does, then runs ``python -m llama_cpp.server`` with the same arguments.
"""

from __future__ import annotations

import runpy

from sqale_desktop.core.engines.llama.backends import load_backends

if __name__ == "__main__":
    load_backends()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
