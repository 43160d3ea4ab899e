"""Known conditions of the world around model files, each with a message fit for the user.

These are not bugs: the UI and CLI show ``str(error)`` and no traceback.  Messages never contain
a token (callers pass none in; hub errors are re-worded, not forwarded).
"""

from __future__ import annotations

from sqale_desktop.core.errors import Cancelled, KnownError


class ModelError(KnownError):
    """Base class: a model file problem the user can understand and act on."""


class DownloadCancelled(ModelError, Cancelled):
    """The user cancelled; the partial file is kept so the download can resume."""


class DownloadStalled(ModelError):
    """The server stopped sending data for longer than the stall limit, every retry."""


class ChecksumMismatch(ModelError):
    """The file's sha256 differs from the hub's; it was deleted and never registered."""


class NotEnoughDiskSpace(ModelError):
    """Not enough free space for the file (checked before starting, or the disk filled up)."""


class AuthRequired(ModelError):
    """The repository is gated or private: a Hugging Face token is needed."""


class HubUnavailable(ModelError):
    """The hub (or the configured endpoint) could not be reached or answered with an error."""


class NotFoundOnHub(ModelError):
    """The repository, revision or file does not exist (or is not visible with this token)."""


class InvalidModelFile(ModelError):
    """A local file is not a GGUF model (wrong magic) or is missing."""


class UnknownModel(ModelError):
    """No model with this id in the registry."""
