"""An engine for OpenAI-compatible servers (vLLM, llama-server, hosted providers): ``/v1/completions``.

The episode is kept as text and sent whole with every turn as a raw prompt (never as chat
messages, which would drop earlier think blocks); servers with a prefix cache (vLLM, llama-server)
then only evaluate what was appended.  Every sampling parameter is sent on every call, under the
names vLLM and llama-server read (``repetition_penalty`` / ``repeat_penalty``), with the stop
strings and ``max_tokens``.  The answer is streamed (server-sent events) and text deltas are
yielded as they arrive.

Transport: ``httpx2``, the maintained successor of httpx that the app already carries for the
model hub (``huggingface_hub`` is built on it), so there is one HTTP stack in the app, not two.
Server-sent events are parsed by httpx2's own ``EventSource`` (derived from httpx-sse), which
follows the WHATWG event-stream rules: CRLF, CR and LF line ends (a CR at the end of one network
chunk paired with an LF at the start of the next), ``:`` comment lines ignored, several ``data:``
lines joined with ``"\\n"``, ``event:``/``id:``/``retry:`` fields.  Where it departs from the
spec, this module covers it:

- it decodes with the ``Content-Type`` charset and keeps a leading byte-order mark, which would
  hide the first field (``"\\ufeffdata"``); the spec says UTF-8 always, one leading BOM dropped, so
  the response's encoding is set to ``utf-8-sig`` before the stream is read;
- it dispatches events that carry only ``id:``/``retry:``/``event:`` lines (the spec dispatches
  only events with data): events without data are skipped here;
- ``retry:`` is read with ``int()``, which also takes signs and underscores; a completion stream is
  never resumed, so the field is not used here at all;
- a CR that ends a network read is held until the next read (it may be the first half of a CRLF),
  so a server that ends its lines with a lone CR has each event yielded one read late: a matter of
  latency only, with no server known to do it, left as it is.

The API key is handed in by the caller (the app keeps it in the keyring); it is only ever put in
the ``Authorization`` header: never logged, never in an exception message.

Cancelling: closing an httpx response from another thread does not end a read already blocked in
``recv`` (on Linux, ``close`` does not wake it), so a watcher thread shuts the socket itself down
as soon as ``cancel`` is set; the blocked read then returns at once, whether the server is
prefilling (no headers yet) or stalled mid-stream.  The socket is handed over by httpcore's
``trace`` request extension (``connection.connect_tcp.complete`` / ``start_tls.complete``), the
earliest point it exists, so a Stop during a long prefill is as prompt as one mid-stream.

Limits a server cannot stretch: the read timeout restarts with every byte, so each completion also
has a deadline (``completion_deadline_s``), enforced by the same watcher that hears Stop; the
completion is cut on the client at ``max_tokens`` text chunks (or ``MAX_CHARS_PER_TOKEN`` times as
many characters) for a server that ignores the parameter; and a 200 answer that holds no event at
all is a malformed response, not an empty answer.

Token counts come from the server's ``usage`` (asked for with ``stream_options.include_usage``);
servers that do not report usage get approximate counts (one token per streamed chunk for
completions, words and punctuation for the prompt).  What the server reported is also kept as it
was, summed over the episode's requests, with its cost at the engine's prices
(``stats.server_usage``, ``core.server_usage``): a hosted provider bills those figures.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2

from sqale_desktop.core.engines.base import (
    STOP_STRINGS,
    EngineError,
    SamplingParams,
    valid_text,
)
from sqale_desktop.core.engines.text_session import TextPromptSession, count_tokens
from sqale_desktop.core.server_usage import Prices, ServerUsage

_log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0  # a CPU server may take minutes to prefill a long prompt
# The whole of one completion, prefill and streaming together.  The read timeout above restarts
# with every byte, so a server that trickles keep-alive comments (or one byte a second) would hold
# an episode forever without it; a CPU server prefilling 16k tokens and writing 2k takes minutes.
DEFAULT_COMPLETION_DEADLINE_S = 900.0
# The client's own bound on a completion, for a server that ignores max_tokens: at most max_tokens
# text chunks (a server streams one or more tokens per chunk) and max_tokens x this many characters
# (a token of the agents' vocabulary is far shorter on average; this only stops a runaway).
MAX_CHARS_PER_TOKEN = 32
UNREACHABLE = "cannot reach the server at"
"""How every message about a server that never answered starts (refused, unknown host, no route,
no connection in time): ``eval run`` stops on a few of these in a row instead of recording an
error episode for every question."""
_WATCH_INTERVAL_S = 0.02
_MAX_ERROR_BODY = 4000
_MAX_LISTING = _MAX_ERROR_BODY * 16


class OpenAIEngine:
    """Completions from an OpenAI-compatible server at ``base_url`` (with or without ``/v1``)."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        template: str | None = None,
        completion_deadline_s: float = DEFAULT_COMPLETION_DEADLINE_S,
        prices: Prices | None = None,
    ) -> None:
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EngineError(f"not a server address: {base_url!r} (expected http://host:port)")
        try:
            port = parts.port
        except ValueError:
            raise EngineError(f"not a server address: {base_url!r} (the port is not a number)") from None
        self.base_url = base_url.strip().rstrip("/")
        path = parts.path.rstrip("/")
        prefix = path if path.endswith("/v1") else f"{path}/v1"
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        # Built from host and port only: user info in the address is never turned into credentials
        # (httpx would send it as Basic auth over the Authorization header), query and fragment
        # are dropped, as with the http.client transport this replaced.
        self._root = f"{parts.scheme}://{host}{f':{port}' if port else ''}{prefix}"
        self._api_key = api_key or None
        self._model = model
        self._timeout_s = timeout_s
        self._deadline_s = completion_deadline_s
        self._template = template
        self.prices = prices
        """Dollars per million tokens for the cost of each episode's reported usage (None: no cost)."""
        self._tls: ssl.SSLContext | None = None
        self._tls_lock = threading.Lock()

    def describe(self) -> str:
        return f"server {self.base_url}"

    def chat_template(self) -> str | None:
        return self._template

    def new_session(self, prompt: str) -> OpenAISession:
        return OpenAISession(self, prompt)

    @property
    def model(self) -> str | None:
        """The model name sent with each request: given, or the server's first from ``/v1/models``."""
        if self._model is None:
            self._model = self._discover_model()
        return self._model or None

    def _discover_model(self) -> str:
        try:
            status, body = self._get("/models")
        except EngineError as exc:
            _log.info("could not list the server's models: %s", exc)
            return ""
        if status != 200:
            return ""
        try:
            data = json.loads(body)
            first = data["data"][0]["id"]
        except (ValueError, KeyError, IndexError, TypeError):
            return ""
        return first if isinstance(first, str) else ""

    def _client(self) -> httpx2.Client:
        """A client for one request: every request has its own connection, closed when it ends.

        ``trust_env=False``: proxies from the environment are not used (a local server must not be
        routed through one, and the transport this replaced never did).  The TLS context does read
        ``SSL_CERT_FILE``/``SSL_CERT_DIR``, as that transport did; it is made once per engine, since
        building one loads the system's certificates.
        """
        with self._tls_lock:
            if self._tls is None:
                self._tls = httpx2.create_ssl_context()
        return httpx2.Client(timeout=httpx2.Timeout(self._timeout_s), verify=self._tls, trust_env=False)

    def _headers(self) -> dict[str, str]:
        # identity: a compressed event stream could be held back by the decompressor
        headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _get(self, path: str) -> tuple[int, bytes]:
        """A small non-streaming request (model listing)."""
        try:
            with (
                self._client() as client,
                client.stream("GET", self._root + path, headers=self._headers()) as r,
            ):
                return r.status_code, _read_capped(r, _MAX_LISTING)
        except httpx2.HTTPError as exc:
            raise EngineError(self.redact(f"{UNREACHABLE} {self.base_url}: {_reason(exc)}")) from None

    def redact(self, text: str) -> str:
        """``text`` with the API key blanked out, for messages that quote a server's answer."""
        return text.replace(self._api_key, "***") if self._api_key else text


class OpenAISession(TextPromptSession):
    """One episode on the server: the prompt text so far, sent whole with every turn.

    Token counts are estimates until a response's ``usage`` corrects them.
    """

    def __init__(self, engine: OpenAIEngine, prompt: str) -> None:
        super().__init__(prompt, evaluates_appends=False)
        self._engine = engine
        self._stats.server_usage = ServerUsage(prices=engine.prices)

    def close(self) -> None:
        """Nothing to release: every request uses its own connection."""

    def generate(self, max_tokens: int, sampling: SamplingParams, cancel: threading.Event) -> Iterator[str]:
        if max_tokens <= 0:
            self._finish = "length"
            return
        if cancel.is_set():
            self._finish = "cancelled"
            return
        engine = self._engine
        # Serialised here, not with httpx's json=: ASCII escapes keep a lone surrogate in the
        # prompt encodable, and the bytes on the wire stay those of the earlier transport.
        body = json.dumps(self._body(max_tokens, sampling)).encode("utf-8")
        self._finish = "stop"
        usage: dict[str, Any] | None = None
        chunks = chars = 0
        char_cap = max_tokens * MAX_CHARS_PER_TOKEN
        answered = served = False
        started = time.perf_counter()
        hangup = _Hangup(cancel, time.monotonic() + engine._deadline_s)
        seen = _Seen()
        over = False
        try:
            with (
                engine._client() as client,
                client.sse(
                    engine._root + "/completions",
                    method="POST",
                    content=body,
                    headers=engine._headers(),
                    extensions={"trace": hangup.trace},
                ) as source,
            ):
                answered = True
                response = source.response
                try:
                    if response.status_code != 200:
                        raise EngineError(engine.redact(_http_error(response)))
                    served = True  # a request the server took on: its usage counts, or is missing
                    response.encoding = "utf-8-sig"  # the spec's decoding (see the module docstring)
                    for event in _payloads(source, cancel, seen):
                        if hangup.expired:
                            break
                        if "error" in event:
                            raise EngineError(
                                engine.redact(f"the server reported an error: {_message(event)}")
                            )
                        if isinstance(event.get("usage"), dict):
                            usage = event["usage"]
                        for choice in _choices(event):
                            text = valid_text(_choice_text(choice))
                            if text and (chunks >= max_tokens or chars + len(text) > char_cap):
                                # the server ignores max_tokens: keep what fits, stop reading
                                text = text[: char_cap - chars] if chunks < max_tokens else ""
                                over = True
                            if text:
                                chunks += 1
                                chars += len(text)
                                self._parts.append(text)
                                yield text
                            if over or choice.get("finish_reason") == "length":
                                self._finish = "length"
                            if over:
                                break
                        if over:
                            break
                finally:
                    hangup.stop()  # before the response is closed and its socket released
            if cancel.is_set():
                self._finish = "cancelled"
            elif hangup.expired:
                raise EngineError(engine.redact(_deadline_error(engine)))
            elif not seen.events and not seen.done:
                raise _malformed(
                    "the answer held no completion events (is this an OpenAI-compatible server?)"
                )
        except httpx2.HTTPError as exc:
            if hangup.expired and not cancel.is_set():
                raise EngineError(engine.redact(_deadline_error(engine))) from None
            if not cancel.is_set():
                raise EngineError(engine.redact(_transport_error(exc, engine, answered))) from None
            self._finish = "cancelled"
        finally:
            hangup.stop()
            self._account(usage, chunks, time.perf_counter() - started, served)

    def _body(self, max_tokens: int, sampling: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": self.prompt_text,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
            "min_p": sampling.min_p,
            "repetition_penalty": sampling.repeat_penalty,
            "repeat_penalty": sampling.repeat_penalty,
            "stop": list(STOP_STRINGS),
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        model = self._engine.model
        if model:
            body["model"] = model
        return body

    def _account(self, usage: dict[str, Any] | None, chunks: int, seconds: float, served: bool) -> None:
        stats = self._stats
        stats.decode_seconds += seconds
        prompt = _int(usage, "prompt_tokens") if usage else None
        completion = _int(usage, "completion_tokens") if usage else None
        details = usage.get("prompt_tokens_details") if usage else None
        cached = _int(details, "cached_tokens") if isinstance(details, dict) else None
        if served and stats.server_usage is not None:
            stats.server_usage.add(prompt, completion, cached)
        if prompt is None or completion is None:
            stats.completion_tokens += chunks
            stats.prompt_tokens = count_tokens(self.prompt_text)
            stats.evaluated_tokens += count_tokens(self.prompt_text)
            return
        stats.completion_tokens += completion
        stats.prompt_tokens = prompt + completion
        stats.evaluated_tokens += prompt - (cached or 0) + completion


class _Hangup:
    """Shuts the request's socket down once ``cancel`` is set or the completion's deadline passes,
    so a blocked read returns at once.

    ``trace`` is the request's httpcore trace callback: it receives each network stream as it is
    made (TCP, then TLS over it) and keeps its socket.  The watcher thread starts with the first
    one and runs until :meth:`stop`.  A socket is shut down, never closed, from here: closing is
    the connection's business, and a shutdown is what wakes a ``recv`` blocked in another thread.
    """

    def __init__(self, cancel: threading.Event, deadline: float) -> None:
        self._cancel = cancel
        self._deadline = deadline
        self.expired = False
        """The completion's deadline (``time.monotonic()``) passed: the socket was shut down."""
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def trace(self, name: str, info: dict[str, Any]) -> None:
        if name not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            if self._done.is_set():
                return
            self._sock = sock
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, daemon=True, name="openai-cancel")
                self._thread.start()

    def stop(self) -> None:
        """End the watcher (idempotent); after this no socket is touched from here."""
        with self._lock:
            self._done.set()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _watch(self) -> None:
        shut: socket.socket | None = None
        while not self._done.wait(_WATCH_INTERVAL_S):
            if not self._cancel.is_set():
                if time.monotonic() < self._deadline:
                    continue
                self.expired = True
            with self._lock:
                if self._done.is_set():
                    return
                sock = self._sock
                if sock is not None and sock is not shut:
                    # The plain socket method, also for TLS: ssl.SSLSocket.shutdown first sets its
                    # _sslobj to None, which a read in the other thread may be checking and about
                    # to use (a ValueError or AttributeError there, not an OSError httpcore maps).
                    with contextlib.suppress(OSError):
                        socket.socket.shutdown(sock, socket.SHUT_RDWR)
                    shut = sock  # a TLS stream made after this is shut down in its turn


@dataclass
class _Seen:
    """What a stream held: JSON events, and whether it ended with ``[DONE]``.  A 200 answer with
    neither (random bytes, a page that is not an event stream) is an error, not an empty answer:
    recorded as ``no_answer`` it would count as wrong, and ``eval --resume`` would never rerun it."""

    events: int = 0
    done: bool = False


def _payloads(source: httpx2.EventSource, cancel: threading.Event, seen: _Seen) -> Iterator[dict[str, Any]]:
    """The JSON objects of a server-sent event stream, up to ``[DONE]`` or a Stop."""
    for event in source:
        if cancel.is_set():
            return
        data = event.data
        if not data:
            continue  # no data: not dispatched under the spec (keep-alive ids, retry hints)
        if data == "[DONE]":
            seen.done = True
            return
        try:
            payload = json.loads(data)
        except ValueError:
            raise _malformed(f"an event is not JSON ({data[:100]!r})") from None
        if not isinstance(payload, dict):
            raise _malformed(f"an event is not a JSON object ({data[:100]!r})")
        seen.events += 1
        yield payload


def _malformed(what: str) -> EngineError:
    return EngineError(f"the server sent a malformed response: {what}")


def _choices(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The event's ``choices``, checked: a list of objects (or nothing)."""
    choices = event.get("choices")
    if choices is None:
        return []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise _malformed(f"'choices' is not a list of objects ({json.dumps(choices)[:100]})")
    return choices


def _choice_text(choice: dict[str, Any]) -> str:
    text = choice.get("text")
    if text is None:
        return ""
    if not isinstance(text, str):
        raise _malformed(f"a choice's 'text' is {type(text).__name__}, not a string")
    return text


def _read_capped(response: httpx2.Response, limit: int) -> bytes:
    """At most ``limit`` bytes of the body: a hostile server cannot make us hold gigabytes."""
    parts: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


def _http_error(response: httpx2.Response) -> str:
    try:
        raw = _read_capped(response, _MAX_ERROR_BODY)
    except httpx2.HTTPError:
        raw = b""
    detail = raw.decode("utf-8", errors="replace").strip()
    with contextlib.suppress(ValueError):
        detail = _message(json.loads(detail))
    status = response.status_code
    hint = " (check the API key)" if status in (401, 403) else ""
    return f"the server answered HTTP {status} {response.reason_phrase}{hint}: {detail[:500]}".rstrip(": ")


def _transport_error(exc: httpx2.HTTPError, engine: OpenAIEngine, answered: bool) -> str:
    """What went wrong on the wire, in words: before the server answered, or while it streamed."""
    where = engine.base_url
    seconds = f"{engine._timeout_s:g} s"
    if isinstance(exc, httpx2.SSEError):
        return str(_malformed(str(exc)))
    if isinstance(exc, httpx2.ConnectTimeout):
        return f"{UNREACHABLE} {where}: no connection within {seconds}"
    if isinstance(exc, httpx2.TimeoutException):
        if answered:
            return f"the server at {where} sent nothing for {seconds} (timed out)"
        return f"the server at {where} did not answer within {seconds} (timed out)"
    if answered:
        return f"the connection to {where} broke: {_reason(exc)}"
    return f"{UNREACHABLE} {where}: {_reason(exc)}"


def _deadline_error(engine: OpenAIEngine) -> str:
    return f"the server at {engine.base_url} did not finish the completion within {engine._deadline_s:g} s"


def _message(payload: Any) -> str:
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            return str(error.get("message") or error)
        return str(error)
    return str(payload)


def _reason(exc: BaseException) -> str:
    """The operating system's words when an OSError is behind ``exc`` ("Connection refused")."""
    seen: BaseException | None = exc
    for _ in range(8):  # httpx2 -> httpcore2 -> OSError; a bound, in case a chain loops
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror
        seen = seen.__cause__ or seen.__context__
    return str(exc) or type(exc).__name__


def _int(mapping: dict[str, Any] | None, key: str) -> int | None:
    value = mapping.get(key) if mapping else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
