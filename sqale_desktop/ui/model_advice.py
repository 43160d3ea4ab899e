"""What the window says about the chosen model before the first question is asked.

The GGUF header tells whether the file is one of the SQaLe agents and what context it was trained
for; reading it touches the disk, so it runs on the pool.  The warnings are banners above every
tab (``fitness``, ``context``); a database with many tables gets a hint on its own tab
(``large_schema``) that depends on the checkpoint read here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from sqale_desktop.core.engine_kinds import kind_of
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.banners import BannerStack
from sqale_desktop.ui.database_page import DatabasePage
from sqale_desktop.ui.workers import JobContext, TaskPool


class ModelAdvice(QObject):
    """Checks the model that ``settings`` chooses and shows the warnings in ``banners``.

    Signals:
        checked(object): the chosen model's GGUF metadata was read (GgufInfo, or None).
        models_wanted(): a banner's Models… button was clicked (the window opens the manager).
    """

    checked = Signal(object)
    models_wanted = Signal()

    def __init__(
        self,
        pool: TaskPool,
        banners: BannerStack,
        settings: Callable[[], Settings],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._pool = pool
        self._banners = banners
        self._settings = settings
        self.checkpoint: str | None = None  # the checkpoint the chosen GGUF was built from
        self._job: JobContext | None = None
        self._closed = False

    def check(self) -> None:
        """Read the chosen model's GGUF header on the pool and warn, before the first question, when
        it is not one of the SQaLe agents or the context is above its training context."""
        if self._job is not None:
            self._job.request_cancel()
        self._banners.dismiss("fitness")
        self._banners.dismiss("context")
        settings = self._settings()
        kind = kind_of(settings.engine)
        if kind is None or not kind.model_file:  # no GGUF to read: a server, a replay
            return
        model_id, n_ctx = settings.model_id, settings.n_ctx

        def job(_ctx: JobContext) -> tuple[Any, str | None]:
            from sqale_desktop.core.models.gguf_info import read_gguf_info
            from sqale_desktop.core.models.registry import Registry

            record = Registry().usable(model_id)
            if record is None:
                return None, None
            return read_gguf_info(record.path), record.source_checkpoint

        def done(result: tuple[Any, str | None]) -> None:
            self._job = None
            info, checkpoint = result
            if self._closed:
                return
            self.show_info(info, checkpoint, n_ctx)

        def failed(exc: BaseException) -> None:
            self._job = None
            if not self._closed:
                self._banners.show_banner("fitness", f"The model file could not be read: {exc}", "error")
                self.checked.emit(None)

        self._job = self._pool.start(job, finished=done, failed=failed)

    def show_info(self, info: Any, checkpoint: str | None, n_ctx: int) -> None:
        """Show what the model's metadata says (called with the result of ``check``)."""
        from sqale_desktop.core.models.gguf_info import context_warning, fitness_warning

        self.checkpoint = checkpoint
        if info is not None:
            warning = fitness_warning(info, checkpoint)
            if warning:
                self._banners.show_banner("fitness", warning, "warning", ("Models…", self._want_models))
            context = context_warning(info, n_ctx)
            if context:
                self._banners.show_banner("context", context, "warning")
        self.checked.emit(info)

    def large_schema_hint(self, page: DatabasePage) -> None:
        """A database with 40+ tables: point at M_SQaLe (trained on large schemas), on its tab."""
        from sqale_desktop.core.models.catalog import large_schema_hint

        hint = large_schema_hint(len(page.schema_model.countable_tables()), self.checkpoint)
        if hint:
            page.banners.show_banner("large_schema", hint, "info", ("Models…", self._want_models))

    def close(self) -> None:
        """The window closes: a check still running shows nothing when it ends."""
        self._closed = True

    def _want_models(self) -> None:
        self.models_wanted.emit()
