"""Engines that generate completions: llama.cpp in-process, OpenAI-compatible HTTP, replay."""
