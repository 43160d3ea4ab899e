"""Looking things up on the Hugging Face hub: GGUF builds of a checkpoint, their files, metadata.

Everything goes through huggingface_hub (``HfApi``, ``get_hf_file_metadata``), imported lazily so
that starting the app never loads it.  The endpoint is read from
``huggingface_hub.constants.ENDPOINT`` at call time and passed explicitly to every call: the
library builds some URL templates from ``HF_ENDPOINT`` once, at import, and passing the endpoint
keeps all calls consistent even when ``HF_ENDPOINT`` was set after that import (tests do).

Hub errors are translated into ``core.models.errors`` with messages written here, so no text from
a response (which could echo request headers) reaches the user or a log.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqale_desktop.core import secrets
from sqale_desktop.core.models.errors import AuthRequired, HubUnavailable, ModelError, NotFoundOnHub

if TYPE_CHECKING:
    from huggingface_hub import HfApi

LIBRARY_NAME = "sqale-desktop"
SUGGESTED_QUANTS = ("Q4_K_M", "Q4_K_S", "Q5_K_M", "Q4_0", "Q8_0")
"""Preference order when suggesting a file: Q4_K_M first (the size/quality point llama.cpp's
documentation recommends and the one ENGINE-NOTES measured)."""

EXTRA_FILES = ("sqale_agent.py", "generation_config.json")
"""Fetched from the checkpoint repository next to a GGUF: the exact training prompt strings and
the sampling settings."""

PROBE_TIMEOUT_S = 1.5
"""How long the reachability probe waits for a TCP connection to the hub (or the proxy)."""
PROBE_TTL_S = 30.0
"""A successful probe is trusted this long, so a search's several calls probe once."""

_log = logging.getLogger(__name__)
_last_reachable: dict[tuple[str, int], float] = {}
_QUANT_RE = re.compile(r"(?i)(?:^|[-_.])((?:I?Q\d(?:_[A-Z0-9]+)*)|BF16|F16|F32)(?=[-_.]|$)")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class GgufFile:
    """One GGUF file in a hub repository."""

    repo: str
    name: str
    size: int | None
    sha256: str | None
    quant: str | None


@dataclass(frozen=True)
class RemoteFile:
    """What the hub says about a file before downloading it."""

    repo: str
    name: str
    commit: str
    etag: str
    size: int
    sha256: str | None
    """LFS sha256 from the hub's paths-info (or an ETag that is one); None for small git files."""

    @property
    def blob_id(self) -> str:
        """The name huggingface_hub gives the blob in its cache (the normalised ETag)."""
        return self.etag


def endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def hub_token() -> str | None:
    """The token from the keyring (or this session's memory); None lets the library use its login.

    A keyring that refuses to answer (locked, denied) is logged and treated as "no token": public
    repositories still work, and a gated one then says that it needs a token.
    """
    try:
        return secrets.get_secret(secrets.HF_TOKEN)
    except secrets.SecretError as exc:
        _log.warning("%s", exc)
        return None


def api(token: str | None = None) -> HfApi:
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint(), token=token, library_name=LIBRARY_NAME)


def quant_of(file_name: str) -> str | None:
    """The quantization named in a GGUF file name (``...-Q4_K_M.gguf`` -> ``Q4_K_M``)."""
    stem = file_name.rsplit("/", 1)[-1]
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    matches = _QUANT_RE.findall(stem)
    return matches[-1].upper() if matches else None


def probe_target() -> tuple[str, int] | None:
    """Host and port a request to the hub connects to first: the proxy when one is configured."""
    from urllib.parse import urlsplit

    url = endpoint()
    scheme = urlsplit(url).scheme or "https"
    proxy = os.environ.get(f"{scheme}_proxy") or os.environ.get(f"{scheme.upper()}_PROXY")
    parts = urlsplit(proxy if proxy else url)
    if not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname, port


def forget_reachability() -> None:
    """Forget which hubs answered lately: the next call probes again, even within
    ``PROBE_TTL_S`` (the endpoint moved to a host and port that answered before, but may not now)."""
    _last_reachable.clear()


def ensure_reachable(what: str) -> None:
    """Fail in under two seconds when the hub cannot be reached at all.

    huggingface_hub retries a refused or timed-out connection five times with backoff (about 25 s
    in all) before it gives up, which is right for a flaky network and wrong for a computer that
    is offline: the user then waits half a minute for "offline".  One TCP connection with a short
    timeout tells the two apart; the library's retries still cover a hub that answers badly.
    """
    target = probe_target()
    if target is None:
        return
    now = time.monotonic()
    if now - _last_reachable.get(target, -PROBE_TTL_S) < PROBE_TTL_S:
        return
    try:
        with socket.create_connection(target, timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise HubUnavailable(
            f"{what}: could not reach {endpoint()} ({reason}). You seem to be offline; models already "
            "on disk keep working, and Import GGUF… adds a file you have."
        ) from None
    _last_reachable[target] = time.monotonic()


@contextmanager
def translated_errors(what: str) -> Iterator[None]:
    """Turn huggingface_hub and network exceptions into ``ModelError`` with our own wording.

    The hub's reachability is checked first (:func:`ensure_reachable`), unless offline mode is on
    (then the library itself refuses at once, with its own exception translated below).
    """
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub import errors as hf_errors

    if not constants.HF_HUB_OFFLINE:
        ensure_reachable(what)
    try:
        yield
    except ModelError:
        raise
    except hf_errors.GatedRepoError:
        raise AuthRequired(
            f"{what} is gated: accept its terms on the Hugging Face website, then add your access "
            "token in Settings (it is stored in the system keyring)."
        ) from None
    except hf_errors.RepositoryNotFoundError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            raise AuthRequired(
                f"{what} needs a Hugging Face access token (the repository is private, gated, or does "
                "not exist). Add a token in Settings; it is stored in the system keyring."
            ) from None
        raise NotFoundOnHub(f"{what}: repository not found on the hub.") from None
    except hf_errors.RevisionNotFoundError:
        raise NotFoundOnHub(f"{what}: revision not found on the hub.") from None
    except hf_errors.RemoteEntryNotFoundError:
        raise NotFoundOnHub(f"{what}: file not found in the repository.") from None
    except hf_errors.OfflineModeIsEnabled:
        raise HubUnavailable("HF_HUB_OFFLINE is set, so the hub is not contacted.") from None
    except hf_errors.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "no"
        if status in (401, 403):
            raise AuthRequired(
                f"{what}: the hub refused access (HTTP {status}). Check the token in Settings."
            ) from None
        raise HubUnavailable(f"{what}: the hub answered HTTP {status}. Try again later.") from None
    except (httpx2.TransportError, ConnectionError) as exc:
        raise HubUnavailable(
            f"{what}: could not reach {endpoint()} ({type(exc).__name__}). Check your connection."
        ) from None


def search_gguf_repos(checkpoint: str, token: str | None = None, limit: int = 50) -> list[str]:
    """Repositories tagged ``gguf`` whose base model is ``checkpoint``, most downloaded first."""
    with translated_errors(f"Searching GGUF builds of {checkpoint}"):
        models = api(token).list_models(
            filter=["gguf", f"base_model:{checkpoint}"], sort="downloads", limit=limit
        )
        return [m.id for m in models]


def list_gguf_files(repo: str, token: str | None = None) -> list[GgufFile]:
    """The GGUF model files of a repository with sizes and LFS sha256 (vision projectors left out)."""
    with translated_errors(repo):
        info = api(token).model_info(repo, files_metadata=True)
    files: list[GgufFile] = []
    for sibling in info.siblings or []:
        name = sibling.rfilename
        base = name.rsplit("/", 1)[-1].lower()
        if not base.endswith(".gguf") or base.startswith("mmproj"):
            continue
        lfs = sibling.lfs
        size = lfs.size if lfs is not None else sibling.size
        files.append(GgufFile(repo, name, size, lfs.sha256 if lfs is not None else None, quant_of(name)))
    return sorted(files, key=lambda f: (f.size or 0, f.name))


def suggest_file(files: list[GgufFile]) -> GgufFile | None:
    """Q4_K_M when there is one, then the next best known quantization, else the smallest file."""
    for quant in SUGGESTED_QUANTS:
        for f in files:
            if f.quant == quant:
                return f
    return min(files, key=lambda f: f.size or 0, default=None)


def base_model_of(repo: str, token: str | None = None) -> str:
    """The ``base_model`` a GGUF repository's card names (empty when it names none or several)."""
    with translated_errors(repo):
        info = api(token).model_info(repo)
    card = info.card_data
    base = card.get("base_model") if card is not None else None
    if isinstance(base, list):
        base = base[0] if len(base) == 1 else None
    return base if isinstance(base, str) else ""


def remote_file(repo: str, name: str, revision: str | None = None, token: str | None = None) -> RemoteFile:
    """Commit, size, ETag and sha256 of a file, pinned to a commit so a resume gets the same bytes."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    what = f"{repo}/{name}"
    with translated_errors(what):
        url = hf_hub_url(repo, name, revision=revision, endpoint=endpoint())
        meta = get_hf_file_metadata(url, token=token, endpoint=endpoint())
        if meta.commit_hash is None or meta.etag is None or meta.size is None:
            raise HubUnavailable(f"{what}: the server's answer lacks the commit, ETag or size headers.")
        sha256: str | None = meta.etag if _SHA256_RE.match(meta.etag) else None
        infos = api(token).get_paths_info(repo, [name], revision=meta.commit_hash)
        for info in infos:
            lfs = getattr(info, "lfs", None)
            if getattr(info, "path", None) == name and lfs is not None:
                sha256 = lfs.sha256
    return RemoteFile(repo, name, meta.commit_hash, meta.etag, meta.size, sha256)


def download_url(remote: RemoteFile) -> str:
    from huggingface_hub import hf_hub_url

    return hf_hub_url(remote.repo, remote.name, revision=remote.commit, endpoint=endpoint())


def request_headers(token: str | None) -> dict[str, str]:
    """The library's own headers (user agent, and Authorization when there is a token)."""
    # Public and documented (huggingface_hub.utils.build_hf_headers), but the package's lazy
    # __init__ imports it without re-exporting it, which mypy's strict mode reports.
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

    headers: dict[str, str] = build_hf_headers(token=token, library_name=LIBRARY_NAME)
    return headers
