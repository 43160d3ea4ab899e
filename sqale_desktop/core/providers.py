"""Hosted providers that serve the SQaLe agents over an OpenAI-compatible API, as named presets.

A preset only fills in what the provider documents: its API's base URL, the model's id there, the
context it serves and its prices.  Everything stays editable in the settings (a provider may move
its API or change its prices); the key is the server API key in the OS keyring, as for any server.

Featherless: the model's page (``trl-lab/qwen3.5-2b-grpo-synsql``: context 32k; input $0.32,
cached input $0.064, output $1.6 per million tokens) and its API documentation
(https://featherless.ai/docs/api-overview-and-common-options: ``https://api.featherless.ai/v1``,
``Authorization: Bearer <key>``, ``/v1/completions``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqale_desktop.core.server_usage import Prices


@dataclass(frozen=True)
class Provider:
    """A named server preset: what the settings dialog fills in when it is chosen."""

    key: str
    name: str
    base_url: str
    model: str
    context: int
    prices: Prices
    source: str
    """Where the figures come from, said beside the prices."""


FEATHERLESS = Provider(
    key="featherless",
    name="Featherless",
    base_url="https://api.featherless.ai/v1",
    model="trl-lab/qwen3.5-2b-grpo-synsql",
    context=32_768,
    prices=Prices(input=0.32, cached_input=0.064, output=1.6),
    source="Featherless's page for trl-lab/qwen3.5-2b-grpo-synsql",
)

PROVIDERS: dict[str, Provider] = {FEATHERLESS.key: FEATHERLESS}

DEFAULT_PRICES = FEATHERLESS.prices
"""The prices the settings start with: the preset's, so a cost shown is the hosted model's unless
the user sets their own (a local server's are 0)."""


def provider_for(base_url: str) -> Provider | None:
    """The preset whose API ``base_url`` is (with or without a trailing ``/``), else None."""
    wanted = base_url.strip().rstrip("/")
    return next((p for p in PROVIDERS.values() if p.base_url.rstrip("/") == wanted), None)
