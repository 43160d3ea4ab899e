"""Hub discovery against the fake hub: GGUF builds of a checkpoint, their files, the suggestion."""

from __future__ import annotations

import pytest

from sqale_desktop.core.models import hub
from sqale_desktop.core.models.errors import AuthRequired, HubUnavailable, NotFoundOnHub
from tests.core.models.fakehub import FakeHub, FakeRepo

CKPT = "trl-lab/qwen3.5-2b-grpo-sqale"


@pytest.fixture
def quants(fake_hub: FakeHub) -> FakeHub:
    files = {
        "sqale-Q8_0.gguf": b"GGUF" + b"8" * 800,
        "sqale-Q4_K_M.gguf": b"GGUF" + b"4" * 400,
        "sqale-IQ2_XXS.gguf": b"GGUF" + b"2" * 200,
        "mmproj-sqale-F16.gguf": b"GGUF" + b"v" * 100,
        "README.md": b"# hi\n",
    }
    fake_hub.add(
        FakeRepo(
            "alice/sqale-GGUF",
            files,
            lfs=set(files) - {"README.md"},
            tags=["gguf"],
            base_model=CKPT,
            downloads=9,
        )
    )
    fake_hub.add(
        FakeRepo(
            "bob/sqale-GGUF",
            {"b-f16.gguf": b"GGUF1"},
            lfs={"b-f16.gguf"},
            tags=["gguf"],
            base_model=CKPT,
            downloads=50,
        )
    )
    fake_hub.add(FakeRepo("carol/other-GGUF", {"c.gguf": b"GGUF"}, tags=["gguf"], base_model="x/y"))
    fake_hub.add(FakeRepo("dave/sqale-mlx", {"w.safetensors": b"{}"}, tags=["mlx"], base_model=CKPT))
    return fake_hub


def test_search_finds_gguf_builds_of_the_checkpoint_only(quants: FakeHub) -> None:
    assert hub.search_gguf_repos(CKPT) == ["bob/sqale-GGUF", "alice/sqale-GGUF"]
    listed = quants.requests("hub", "GET")[-1].path
    assert "filter=gguf" in listed and "base_model%3Atrl-lab" in listed


def test_files_have_sizes_sha256_and_q4_k_m_is_suggested(quants: FakeHub) -> None:
    files = hub.list_gguf_files("alice/sqale-GGUF")
    assert [f.name for f in files] == ["sqale-IQ2_XXS.gguf", "sqale-Q4_K_M.gguf", "sqale-Q8_0.gguf"]
    assert [f.quant for f in files] == ["IQ2_XXS", "Q4_K_M", "Q8_0"]
    assert files[1].size == 404
    assert files[1].sha256 == quants.repos["alice/sqale-GGUF"].sha256("sqale-Q4_K_M.gguf")
    suggested = hub.suggest_file(files)
    assert suggested is not None and suggested.quant == "Q4_K_M"
    assert hub.suggest_file([f for f in files if f.quant != "Q4_K_M"]).quant == "Q8_0"  # type: ignore[union-attr]
    assert hub.suggest_file([]) is None


def test_quant_names() -> None:
    assert hub.quant_of("Qwen3.5-2B-Q4_K_M.gguf") == "Q4_K_M"
    assert hub.quant_of("model.q5_k_s.gguf") == "Q5_K_S"
    assert hub.quant_of("model-bf16.gguf") == "BF16"
    assert hub.quant_of("model.gguf") is None


def test_remote_metadata_pins_commit_and_has_lfs_sha256(quants: FakeHub) -> None:
    repo = quants.repos["alice/sqale-GGUF"]
    remote = hub.remote_file("alice/sqale-GGUF", "sqale-Q4_K_M.gguf")
    assert remote.commit == repo.commit
    assert remote.sha256 == repo.sha256("sqale-Q4_K_M.gguf")
    assert remote.size == 404
    assert hub.base_model_of("alice/sqale-GGUF") == CKPT


def test_errors_are_translated(quants: FakeHub) -> None:
    with pytest.raises(NotFoundOnHub):
        hub.remote_file("alice/sqale-GGUF", "nope.gguf")
    quants.repos["alice/sqale-GGUF"].gated_token = "hf_x"
    with pytest.raises(AuthRequired, match="token"):
        hub.list_gguf_files("alice/sqale-GGUF")


def test_unreachable_hub_is_a_clear_error(fake_hub: FakeHub) -> None:
    fake_hub.stop()
    # metadata is asked without the library's retries (search and listing retry for ~20 s)
    with pytest.raises(HubUnavailable, match="could not reach"):
        hub.remote_file("alice/sqale-GGUF", "sqale-Q4_K_M.gguf")


def test_token_comes_from_the_keyring_and_a_locked_keyring_means_none() -> None:
    from keyring.backend import KeyringBackend

    from sqale_desktop.core import secrets

    class Locked(KeyringBackend):
        priority = 1  # type: ignore[assignment]

        def get_password(self, service: str, username: str) -> str | None:
            raise RuntimeError("locked")

        def set_password(self, service: str, username: str, password: str) -> None:
            raise RuntimeError("locked")

        def delete_password(self, service: str, username: str) -> None:
            raise RuntimeError("locked")

    from keyring.backends import fail

    try:
        secrets.use_backend(fail.Keyring())
        secrets.set_secret(secrets.HF_TOKEN, "hf_fromkeyring")
        assert hub.hub_token() == "hf_fromkeyring"
        secrets.use_backend(Locked())
        assert hub.hub_token() is None
    finally:
        secrets.use_backend(None)
