"""Fixtures the command tests share with the model tests: the fake hub on 127.0.0.1 and its environment."""

from tests.core.models.conftest import fake_hub, hf_env

__all__ = ["fake_hub", "hf_env"]
