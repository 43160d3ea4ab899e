"""An engine for OpenAI-compatible servers (vLLM, llama-server, hosted providers): ``/v1/completions``.

The episode is kept as text and sent whole with every turn as a raw prompt (never as chat
messages, which would drop earlier think blocks); servers with a prefix cache (vLLM, llama-server)
then only evaluate what was appended.  Every sampling parameter is sent on every call, under the
names vLLM and llama-server read (``repetition_penalty`` / ``repeat_penalty``), with the stop
strings and ``max_tokens``.  The answer is streamed (server-sent events) and text deltas are
yielded as they arrive.

The API key is handed in by the caller (the app keeps it in the keyring); it is only ever put in
the ``Authorization`` header: never logged, never in an exception message.

Cancelling: a watcher thread shuts the socket down as soon as ``cancel`` is set, so a stalled or
slow server cannot delay a Stop (the read in progress ends at once).

Token counts come from the server's ``usage`` (asked for with ``stream_options.include_usage``);
servers that do not report usage get approximate counts (one token per streamed chunk for
completions, words and punctuation for the prompt).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from sqale_desktop.core.engines.base import (
    STOP_STRINGS,
    EngineError,
    SamplingParams,
    valid_text,
)
from sqale_desktop.core.engines.text_session import TextPromptSession, count_tokens

_log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0  # a CPU server may take minutes to prefill a long prompt
_WATCH_INTERVAL_S = 0.02
_MAX_ERROR_BODY = 4000


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
    ) -> None:
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EngineError(f"not a server address: {base_url!r} (expected http://host:port)")
        self.base_url = base_url.strip().rstrip("/")
        path = parts.path.rstrip("/")
        self._prefix = path if path.endswith("/v1") else f"{path}/v1"
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._api_key = api_key or None
        self._model = model
        self._timeout_s = timeout_s
        self._template = template

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
            status, body = self._request("GET", "/models")
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

    def _connection(self) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout_s)
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout_s)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _request(self, method: str, path: str) -> tuple[int, bytes]:
        """A small non-streaming request (model listing)."""
        conn = self._connection()
        try:
            conn.request(method, self._prefix + path, headers=self._headers())
            response = conn.getresponse()
            return response.status, response.read(_MAX_ERROR_BODY * 16)
        except (OSError, http.client.HTTPException) as exc:
            raise EngineError(
                self.redact(f"cannot reach the server at {self.base_url}: {_reason(exc)}")
            ) from None
        finally:
            conn.close()

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
        body = json.dumps(self._body(max_tokens, sampling)).encode("utf-8")
        conn = engine._connection()
        done = threading.Event()
        self._finish = "stop"
        usage: dict[str, Any] | None = None
        chunks = 0
        started = time.perf_counter()
        try:
            try:
                conn.connect()
                # http.client drops its own reference once a "Connection: close" response starts,
                # so the watcher keeps the socket itself.
                watcher = threading.Thread(
                    target=_watch, args=(conn.sock, cancel, done), daemon=True, name="openai-cancel"
                )
                watcher.start()
                conn.request("POST", engine._prefix + "/completions", body=body, headers=engine._headers())
                response = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                if cancel.is_set():
                    self._finish = "cancelled"
                    return
                raise EngineError(
                    engine.redact(f"cannot reach the server at {engine.base_url}: {_reason(exc)}")
                ) from None
            if response.status != 200:
                raise EngineError(engine.redact(_http_error(response)))
            for event in _events(response, cancel):
                if "error" in event:
                    raise EngineError(engine.redact(f"the server reported an error: {_message(event)}"))
                if isinstance(event.get("usage"), dict):
                    usage = event["usage"]
                for choice in _choices(event):
                    text = valid_text(_choice_text(choice))
                    if text:
                        chunks += 1
                        self._parts.append(text)
                        yield text
                    reason = choice.get("finish_reason")
                    if reason == "length":
                        self._finish = "length"
            if cancel.is_set():
                self._finish = "cancelled"
        except (OSError, http.client.HTTPException) as exc:
            if not cancel.is_set():
                raise EngineError(
                    engine.redact(f"the connection to {engine.base_url} broke: {_reason(exc)}")
                ) from None
            self._finish = "cancelled"
        finally:
            done.set()
            conn.close()
            self._account(usage, chunks, time.perf_counter() - started)

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

    def _account(self, usage: dict[str, Any] | None, chunks: int, seconds: float) -> None:
        stats = self._stats
        stats.decode_seconds += seconds
        prompt = _int(usage, "prompt_tokens") if usage else None
        completion = _int(usage, "completion_tokens") if usage else None
        if prompt is None or completion is None:
            stats.completion_tokens += chunks
            stats.prompt_tokens = count_tokens(self.prompt_text)
            stats.evaluated_tokens += count_tokens(self.prompt_text)
            return
        details = usage.get("prompt_tokens_details") if usage else None
        cached = _int(details, "cached_tokens") if isinstance(details, dict) else None
        stats.completion_tokens += completion
        stats.prompt_tokens = prompt + completion
        stats.evaluated_tokens += prompt - (cached or 0) + completion


def _events(response: http.client.HTTPResponse, cancel: threading.Event) -> Iterator[dict[str, Any]]:
    """The JSON objects of a server-sent event stream, up to ``[DONE]``."""
    while not cancel.is_set():
        line = response.readline()
        if not line:
            return
        text = line.decode("utf-8", errors="replace").strip()
        if not text.startswith("data:"):
            continue  # comments, event names, keep-alives, blank separators
        data = text[len("data:") :].strip()
        if data == "[DONE]":
            return
        try:
            event = json.loads(data)
        except ValueError:
            _log.warning("skipping a malformed event from the server: %.200s", data)
            continue
        if isinstance(event, dict):
            yield event


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


def _watch(sock: socket.socket | None, cancel: threading.Event, done: threading.Event) -> None:
    """Shut the socket down when ``cancel`` is set, so a blocked read returns at once."""
    while not done.wait(_WATCH_INTERVAL_S):
        if cancel.is_set():
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            return


def _http_error(response: http.client.HTTPResponse) -> str:
    try:
        raw = response.read(_MAX_ERROR_BODY)
    except (OSError, http.client.HTTPException):
        raw = b""
    detail = raw.decode("utf-8", errors="replace").strip()
    with contextlib.suppress(ValueError):
        detail = _message(json.loads(detail))
    hint = " (check the API key)" if response.status in (401, 403) else ""
    return f"the server answered HTTP {response.status} {response.reason}{hint}: {detail[:500]}".rstrip(": ")


def _message(payload: Any) -> str:
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            return str(error.get("message") or error)
        return str(error)
    return str(payload)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _int(mapping: dict[str, Any] | None, key: str) -> int | None:
    value = mapping.get(key) if mapping else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
