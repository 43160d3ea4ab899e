"""What a server said an episode used, and what that costs at the configured prices.

A hosted provider bills the tokens its answers report in ``usage`` (``prompt_tokens``,
``completion_tokens``, and ``prompt_tokens_details.cached_tokens`` for the part of the prompt its
prefix cache served at the cheaper cached-input price).  Every turn of an episode is its own
request carrying the whole prompt so far, so an episode's bill is the sum over its requests: the
figures here are those sums, exactly as reported, never estimated.  A request whose answer held no
usage leaves the episode's tokens incomplete: ``unreported`` counts such requests and the cost is
then unknown (None) rather than a figure that looks exact and is low.

Prices are dollars per million tokens, as providers quote them.
"""

from __future__ import annotations

from dataclasses import dataclass

PER_TOKENS = 1_000_000
"""Prices are per this many tokens."""


@dataclass(frozen=True)
class Prices:
    """Dollars per million tokens: input (prompt), cached input, output (completion)."""

    input: float
    cached_input: float
    output: float
    source: str = ""
    """Where the figures come from ("the settings", or the provider page the defaults are from)."""


@dataclass
class ServerUsage:
    """The tokens a server reported for an episode's requests, summed, and their cost.

    ``input_tokens`` includes ``cached_tokens`` (as the API reports ``prompt_tokens``).  ``cost_usd``
    is None when a request reported no usage or no prices were given.
    """

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    unreported: int = 0
    """Requests whose answer held no ``usage``: their tokens are missing from the sums above."""
    cost_usd: float | None = None
    prices: Prices | None = None
    """The prices ``cost_usd`` was computed at (the settings' when the episode ran)."""

    def add(self, prompt: int | None, completion: int | None, cached: int | None) -> None:
        """One request's reported usage (None where the answer did not say), the cost recomputed."""
        self.requests += 1
        if prompt is None or completion is None:
            self.unreported += 1
        else:
            self.input_tokens += prompt
            self.output_tokens += completion
            self.cached_tokens += min(max(cached or 0, 0), prompt)
        self.cost_usd = self.cost(self.prices)

    def cost(self, prices: Prices | None) -> float | None:
        """The sums at ``prices``; None when any request went unreported or there are no prices."""
        if prices is None or self.unreported or not self.requests:
            return None
        fresh = (self.input_tokens - self.cached_tokens) * prices.input
        cached = self.cached_tokens * prices.cached_input
        return (fresh + cached + self.output_tokens * prices.output) / PER_TOKENS


def usage_line(usage: ServerUsage | None) -> str:
    """The answer card's words for ``usage``: "12,345 tokens in (8,000 cached) · 321 out · $0.0041";
    "" for a local engine (nothing billed)."""
    if usage is None or not usage.requests:
        return ""
    if usage.unreported == usage.requests:
        return "the server reported no token usage"
    cached = f" ({usage.cached_tokens:,} cached)" if usage.cached_tokens else ""
    text = f"{usage.input_tokens:,} tokens in{cached} · {usage.output_tokens:,} out"
    if usage.unreported:
        return f"{text} (usage missing from {usage.unreported} of {usage.requests} answers: cost unknown)"
    if usage.cost_usd is not None:
        text += f" · {format_usd(usage.cost_usd)}"
    return text


def format_usd(value: float) -> str:
    """Dollars with enough digits that a fraction of a cent still reads (``$0.0041``, ``$1.23``)."""
    if value == 0:
        return "$0"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    return f"${value:.2g}" if abs(value) < 0.0001 else f"${value:.4f}"


def total(usages: list[ServerUsage | None], prices: Prices | None) -> ServerUsage | None:
    """The sums of several episodes' usage (an evaluation run), the cost at ``prices``; None when
    none of them ran on a server."""
    found = [u for u in usages if u is not None and u.requests]
    if not found:
        return None
    summed = ServerUsage(prices=prices)
    for usage in found:
        summed.input_tokens += usage.input_tokens
        summed.cached_tokens += usage.cached_tokens
        summed.output_tokens += usage.output_tokens
        summed.requests += usage.requests
        summed.unreported += usage.unreported
    summed.cost_usd = summed.cost(prices)
    return summed
