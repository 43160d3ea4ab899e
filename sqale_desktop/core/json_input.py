"""Reading JSON that a person, another program or a damaged disk wrote: every failure a ``ValueError``.

``json.loads`` raises ``RecursionError`` (not ``ValueError``) for an array nested 100,000 deep and
``UnicodeDecodeError`` for bytes that are not UTF-8; callers that turn a bad file into a clear
message catch ``ValueError`` only, so both are folded into it here, with the reason in words.
"""

from __future__ import annotations

import json
from typing import Any

from sqale_desktop.core.errors import KnownError


class JsonInputError(KnownError, ValueError):
    """Text that is not usable JSON; ``str()`` says why (not JSON, not UTF-8, nested too deeply)."""


def loads(data: str | bytes) -> Any:
    """``json.loads`` whose only failure is ``JsonInputError`` (a ``ValueError``)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonInputError(f"not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(data)
    except RecursionError:
        raise JsonInputError("nested too deeply to read") from None
    except ValueError as exc:
        raise JsonInputError(f"not valid JSON ({exc})") from None
