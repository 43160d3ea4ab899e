"""Secrets: the keyring when there is one, memory for the session when there is none."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from keyring.backend import KeyringBackend
from keyring.backends import chainer, fail

from sqale_desktop.core import secrets


class DictKeyring(KeyringBackend):
    """A real keyring backend (the library's base class) that stores in a dict."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        import keyring.errors

        if (service, username) not in self.store:
            raise keyring.errors.PasswordDeleteError(username)
        del self.store[(service, username)]


class BrokenKeyring(DictKeyring):
    def set_password(self, service: str, username: str, password: str) -> None:
        raise RuntimeError(f"locked while storing {password}")


@pytest.fixture(autouse=True)
def _restore_backend() -> Iterator[None]:
    yield
    secrets.use_backend(None)


def test_fail_backend_means_memory_only() -> None:
    secrets.use_backend(fail.Keyring())
    assert not secrets.keyring_available()
    assert secrets.keyring_message() == secrets.NO_KEYRING_MESSAGE
    assert secrets.set_secret(secrets.HF_TOKEN, "hf_memoryonly") is False
    assert secrets.get_secret(secrets.HF_TOKEN) == "hf_memoryonly"
    secrets.delete_secret(secrets.HF_TOKEN)
    assert secrets.get_secret(secrets.HF_TOKEN) is None


def test_empty_chainer_means_memory_only() -> None:
    class EmptyChainer(chainer.ChainerBackend):
        backends: tuple[()] = ()  # type: ignore[assignment]  # what the chainer finds on a bare headless box

    secrets.use_backend(EmptyChainer())
    assert not secrets.keyring_available()


def test_real_backend_stores_in_keyring() -> None:
    backend = DictKeyring()
    secrets.use_backend(backend)
    assert secrets.keyring_available()
    assert secrets.keyring_message() is None
    assert secrets.set_secret(secrets.SERVER_API_KEY, "sk-abc") is True
    assert backend.store[(secrets.SERVICE, secrets.SERVER_API_KEY)] == "sk-abc"
    assert secrets.get_secret(secrets.SERVER_API_KEY) == "sk-abc"
    secrets.delete_secret(secrets.SERVER_API_KEY)
    secrets.delete_secret(secrets.SERVER_API_KEY)  # twice is fine
    assert secrets.get_secret(secrets.SERVER_API_KEY) is None


def test_keyring_error_never_contains_the_value() -> None:
    secrets.use_backend(BrokenKeyring())
    with pytest.raises(secrets.SecretError) as info:
        secrets.set_secret(secrets.HF_TOKEN, "hf_SECRETVALUE")
    assert "hf_SECRETVALUE" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__
