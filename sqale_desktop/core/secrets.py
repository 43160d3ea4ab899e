"""Secrets (the hub token, server API keys) in the OS keyring, or in memory when there is none.

Headless Linux often has no keyring backend (``keyring.backends.fail`` or a chainer with
nothing in it).  Then a secret is kept for this session only and ``keyring_message()`` gives the
UI a sentence to show, as Vorta does.  Secrets are never written to settings, logs or exception
messages: errors here name the secret, never its value.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqale_desktop.core.errors import KnownError

SERVICE = "sqale-desktop"
HF_TOKEN = "hf_token"
SERVER_API_KEY = "server_api_key"
KNOWN_NAMES = (HF_TOKEN, SERVER_API_KEY)

NO_KEYRING_MESSAGE = (
    "No system keyring is available, so secrets (the Hugging Face token, server API keys) are "
    "kept in memory for this session only and must be entered again next time. Install and "
    "unlock a keyring (GNOME Keyring, KWallet, KeePassXC's Secret Service) to remember them."
)

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_memory: dict[str, str] = {}
_forced_backend: Any = None


class SecretError(KnownError, RuntimeError):
    """The keyring refused an operation (locked, denied); the message never holds the value."""


def _backend() -> Any:
    import keyring

    return _forced_backend if _forced_backend is not None else keyring.get_keyring()


def use_backend(backend: Any) -> None:
    """Use this keyring backend instead of the system's (tests; ``None`` restores the default)."""
    global _forced_backend
    _forced_backend = backend
    with _lock:
        _memory.clear()


def _usable(backend: Any) -> bool:
    from keyring.backends import chainer, fail

    if isinstance(backend, fail.Keyring):
        return False
    if isinstance(backend, chainer.ChainerBackend):
        return bool(backend.backends)
    priority = getattr(backend, "priority", 1)
    try:
        return float(priority) > 0
    except (TypeError, ValueError):
        return True


def keyring_available() -> bool:
    """Whether secrets survive a restart (a real keyring backend exists)."""
    try:
        return _usable(_backend())
    except Exception:  # a broken keyring install is the same as none for the user
        _log.warning("keyring backend could not be determined", exc_info=False)
        return False


def keyring_message() -> str | None:
    """The sentence the UI shows when there is no keyring, else ``None``."""
    return None if keyring_available() else NO_KEYRING_MESSAGE


def get_secret(name: str) -> str | None:
    """The stored secret ``name``, or ``None``."""
    with _lock:
        if name in _memory:
            return _memory[name]
    if not keyring_available():
        return None
    try:
        value: str | None = _backend().get_password(SERVICE, name)
    except Exception as exc:
        raise SecretError(f"Could not read {name!r} from the keyring ({type(exc).__name__}).") from None
    return value


def set_secret(name: str, value: str) -> bool:
    """Store ``value``; returns True if it went to the keyring, False if memory-only."""
    if not value:
        delete_secret(name)
        return keyring_available()
    if keyring_available():
        try:
            _backend().set_password(SERVICE, name, value)
        except Exception as exc:
            raise SecretError(f"Could not save {name!r} to the keyring ({type(exc).__name__}).") from None
        with _lock:
            _memory.pop(name, None)
        return True
    with _lock:
        _memory[name] = value
    return False


def delete_secret(name: str) -> None:
    """Forget the secret everywhere; deleting one that does not exist is not an error."""
    with _lock:
        _memory.pop(name, None)
    if not keyring_available():
        return
    import keyring.errors

    try:
        _backend().delete_password(SERVICE, name)
    except keyring.errors.PasswordDeleteError:
        pass
    except Exception as exc:
        raise SecretError(f"Could not delete {name!r} from the keyring ({type(exc).__name__}).") from None
