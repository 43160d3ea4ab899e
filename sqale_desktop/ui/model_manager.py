"""The model manager: installed models (use, verify, remove, import), downloads from the hub, and
conversion of a published safetensors checkpoint into a GGUF on this computer.

Everything slow (hub lookups, the download, hashing a 1 GB file) runs on the pool with progress
and a cancel button; the dialog only shows what ``core.models`` reports.  Errors there are known
conditions with messages for people (``ModelError``), shown under the list.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core.engine_kinds import LLAMA, kind_of
from sqale_desktop.core.models.catalog import (
    CATALOG,
    conversion_estimate,
    explain_choice,
    large_schema_hint,
    suggested_entry,
)
from sqale_desktop.core.models.convert.quantize import DEFAULT_QUANT, QUANT_TYPES
from sqale_desktop.core.models.registry import ModelRecord, Registry
from sqale_desktop.core.units import format_bytes
from sqale_desktop.ui.workers import JobContext, TaskPool


def _size(n: int | None) -> str:
    """A size for the table; 0 is a size not known yet (a listing without sizes), like None."""
    return format_bytes(n or None)


class ModelManagerDialog(QDialog):
    """Installed models and downloads.

    Signals:
        model_chosen(str): the user picked a model to use (its registry id).
        model_kept(str): the model already in use (picked by default, the settings naming none)
            is now the chosen one: the settings should name it, and nothing needs to reload.
        models_changed(): the registry changed (added, removed).
    """

    model_chosen = Signal(str)
    model_kept = Signal(str)
    models_changed = Signal()

    def __init__(
        self,
        pool: TaskPool,
        parent: QWidget | None = None,
        registry: Registry | None = None,
        active_model_id: str = "",
        table_count: int | None = None,
        engine: str = LLAMA,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Model Manager")  # the name of the menu item that opens it
        self.resize(820, 600)
        self._pool = pool
        self.registry = registry or Registry()
        self.active_model_id = active_model_id
        self.engine = engine  # the settings' engine: with a server, no local model is in use
        self.table_count = table_count
        self._job: JobContext | None = None
        self._search_job: JobContext | None = None  # hub lookups run beside imports and verifies
        self._files: list[Any] = []
        self._chain = False  # get_suggested(): download the suggestion once found, then select it

        layout = QVBoxLayout(self)
        layout.addWidget(self._installed_group(), 1)
        layout.addWidget(self._download_group(table_count))
        layout.addWidget(self._convert_group())
        self._add_footer(layout)
        self.refresh()

    # building -------------------------------------------------------------------------------
    # One method per group, called in the order the groups stand (the order their widgets are
    # made is the Tab key's order).
    def _installed_group(self) -> QGroupBox:
        """The installed models' table and its buttons (Use, Verify, Remove, Import GGUF…)."""
        self.table = QTableWidget(0, 4, self)
        self.table.setHorizontalHeaderLabels(["Model", "Size", "From", "Checkpoint"])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setVisible(False)
        self.use_button = QPushButton("Use", self)
        self.verify_button = QPushButton("Verify", self)
        self.remove_button = QPushButton("Remove", self)
        self.import_button = QPushButton("Import GGUF…", self)
        self.use_button.clicked.connect(self.use_selected)
        self.verify_button.clicked.connect(self.verify_selected)
        self.remove_button.clicked.connect(self.remove_selected)
        self.import_button.clicked.connect(self.ask_import)
        installed_buttons = QHBoxLayout()
        for button in (self.use_button, self.verify_button, self.remove_button):
            installed_buttons.addWidget(button)
        installed_buttons.addStretch(1)
        installed_buttons.addWidget(self.import_button)
        installed = QGroupBox("Installed", self)
        installed_layout = QVBoxLayout(installed)
        installed_layout.addWidget(self.table)
        installed_layout.addLayout(installed_buttons)
        return installed

    def _download_group(self, table_count: int | None) -> QGroupBox:
        """The hub: the suggested checkpoint for a database of ``table_count`` tables, a GGUF
        repository's builds, Download and Cancel."""
        self.checkpoint = QComboBox(self)
        for entry in CATALOG:
            scores = f"SQaLe test {entry.accuracy.sqale_test:.1f}%, BIRD dev {entry.accuracy.bird_dev:.1f}%"
            self.checkpoint.addItem(f"{entry.name} — {scores}", entry.repo_id)
            self.checkpoint.setItemData(
                self.checkpoint.count() - 1, entry.summary, Qt.ItemDataRole.ToolTipRole
            )
        self.checkpoint.setCurrentIndex(self.checkpoint.findData(suggested_entry(table_count).repo_id))
        self.explanation = QLabel(explain_choice(table_count), self)
        self.explanation.setObjectName("checkpointExplanation")
        self.explanation.setWordWrap(True)
        hint = large_schema_hint(table_count or 0)
        self.large_hint = QLabel(hint or "", self)
        self.large_hint.setObjectName("largeSchemaHint")
        self.large_hint.setWordWrap(True)
        self.large_hint.setVisible(bool(hint))
        self.get_button = QPushButton("Get the suggested model", self)
        self.get_button.setToolTip("Find its GGUF build, download it with progress, and use it")
        self.get_button.clicked.connect(self.get_suggested)
        self.repo = QLineEdit(self)
        self.repo.setPlaceholderText("GGUF repository (owner/name); Find fills it in")
        self.find_button = QPushButton("Find GGUF builds", self)
        self.find_button.clicked.connect(self.find_builds)
        self.file = QComboBox(self)
        self.download_button = QPushButton("Download", self)
        self.download_button.clicked.connect(self.download)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.setEnabled(False)
        download = QGroupBox("Download from Hugging Face", self)
        download_layout = QVBoxLayout(download)
        row1 = QHBoxLayout()
        row1.addWidget(QLabel("Checkpoint", download))
        row1.addWidget(self.checkpoint, 1)
        row1.addWidget(self.get_button)
        download_layout.addWidget(self.explanation)
        download_layout.addWidget(self.large_hint)
        row2 = QHBoxLayout()
        row2.addWidget(self.repo, 1)
        row2.addWidget(self.find_button)
        row3 = QHBoxLayout()
        row3.addWidget(self.file, 1)
        row3.addWidget(self.download_button)
        row3.addWidget(self.cancel_button)
        for row in (row1, row2, row3):
            download_layout.addLayout(row)
        return download

    def _convert_group(self) -> QGroupBox:
        """When no GGUF build exists: convert the checkpoint (the one chosen above, or a local
        folder) into a GGUF on this computer (``core.models.convert``)."""
        self.convert_source = QLineEdit(self)
        self.convert_source.setPlaceholderText("checkpoint: the one chosen above, or a local folder")
        self.convert_folder_button = QPushButton("Folder…", self)
        self.convert_folder_button.clicked.connect(self.ask_convert_folder)
        self.quant = QComboBox(self)
        for name in QUANT_TYPES:
            self.quant.addItem(name, name)
        self.quant.setCurrentIndex(self.quant.findData(DEFAULT_QUANT))
        self.convert_button = QPushButton("Convert", self)
        self.convert_button.setToolTip(
            "Download the safetensors checkpoint, write a GGUF, quantize it, check that it "
            "generates, and install it"
        )
        self.convert_button.clicked.connect(self.convert)
        convert = QGroupBox("No GGUF build? Convert the checkpoint on this computer", self)
        convert_row = QHBoxLayout(convert)
        convert_row.addWidget(self.convert_source, 1)
        convert_row.addWidget(self.convert_folder_button)
        convert_row.addWidget(self.quant)
        convert_row.addWidget(self.convert_button)
        return convert

    def _add_footer(self, layout: QVBoxLayout) -> None:
        """The message line, the job bar under it and Close, at the foot of ``layout``."""
        self.message = QLabel("", self)
        self.message.setWordWrap(True)
        self.message.setObjectName("modelMessage")
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QPushButton("Close", self)
        close.clicked.connect(self.accept)
        layout.addWidget(self.message)
        # One bar for whichever job runs (download, import, verify, convert), beside the line that
        # names the job, shown only while it runs: inside the download box it read as a finished
        # download after an import.
        self.progress = QProgressBar(self)
        self.progress.setObjectName("jobProgress")
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.hide()
        layout.addWidget(self.progress)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(close)
        layout.addLayout(bottom)

    # state ----------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """A job runs (a download, an import, a verify or a conversion): another waits for it."""
        return self._job is not None

    @property
    def searching(self) -> bool:
        """A hub lookup (Find GGUF builds, or the first step of Get) runs."""
        return self._search_job is not None

    @property
    def getting_suggested(self) -> bool:
        """Get the suggested model is under way: its build is downloaded and used once found."""
        return self._chain

    # installed ------------------------------------------------------------------------------
    def records(self) -> list[ModelRecord]:
        try:
            return self.registry.list()
        except Exception as exc:  # a broken registry file is a known condition: say so
            self.message.setText(f"Could not read the model registry: {exc}")
            return []

    def in_use_id(self) -> str:
        """The model the app loads: the settings' choice when its file is there, else the oldest
        usable one, as ``core.runtime`` picks it (``Registry.usable``); "" when there is none, or
        when the app talks to a server."""
        kind = kind_of(self.engine)
        if kind is None or not kind.model_file:
            return ""
        try:
            record = self.registry.usable(self.active_model_id or None)
        except Exception:  # a file changed since it was registered: the settings' choice stands
            return self.active_model_id
        return record.id if record is not None else ""

    def refresh(self) -> None:
        records = self.records()
        in_use = self.in_use_id() if records else ""
        self.table.setRowCount(len(records))
        for row, record in enumerate(records):
            name = QTableWidgetItem(record.name)
            name.setData(Qt.ItemDataRole.UserRole, record.id)
            name.setToolTip(record.path)
            missing = not Path(record.path).is_file()
            if missing:
                name.setText(f"{record.name} (file missing)")
            if record.id == in_use:
                name.setText(f"✓ {name.text()} — in use")
                font = name.font()
                font.setBold(True)
                name.setFont(font)
            self.table.setItem(row, 0, name)
            self.table.setItem(row, 1, QTableWidgetItem(_size(record.size)))
            self.table.setItem(row, 2, QTableWidgetItem(record.repo or record.origin))
            self.table.setItem(row, 3, QTableWidgetItem(record.source_checkpoint or "—"))
        has = bool(records)
        for button in (self.use_button, self.verify_button, self.remove_button):
            button.setEnabled(has)
        if has and not self.table.selectedItems():
            active = next((r for r, rec in enumerate(records) if rec.id == in_use), 0)
            self.table.selectRow(active)
        if not has and not self.message.text():
            self.message.setText(
                "No model installed yet. Download one below, or import a GGUF file you have."
            )

    def selected_id(self) -> str | None:
        row = self.table.currentRow()
        item = self.table.item(row, 0) if row >= 0 else None
        value = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return str(value) if value else None

    def use_selected(self) -> None:
        """Use the selected model; the one already in use stays loaded (it is only named in the
        settings when they named none)."""
        model_id = self.selected_id()
        if model_id and model_id == self.in_use_id():
            self._keep(model_id)
            self.message.setText(f"{model_id} is already in use.")
        elif model_id:
            self.model_chosen.emit(model_id)
            self.active_model_id = model_id
            self.refresh()
            self.message.setText(f"Using {model_id}; it loads on the next question.")

    def remove_selected(self) -> None:
        model_id = self.selected_id()
        if not model_id:
            return
        try:
            record = self.registry.remove(model_id)
        except Exception as exc:
            self.message.setText(str(exc))
            return
        self.message.setText(f"Removed {record.id} from the list (the file stays at {record.path}).")
        self.refresh()
        self.models_changed.emit()

    def verify_selected(self) -> None:
        model_id = self.selected_id()
        if not model_id or self._job is not None:
            return
        registry = self.registry
        self._busy(f"Verifying {model_id}…")
        self._job = self._pool.start(
            lambda ctx: registry.verify(model_id, progress=lambda done, total: ctx.progress((done, total))),
            finished=lambda result: self._done(result.message),
            failed=lambda exc: self._done(str(exc)),
            progress=self._bytes_progress,
        )

    def ask_import(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Import a GGUF model", "", "GGUF models (*.gguf)")
        if name:
            self.import_file(Path(name))

    def import_file(self, path: Path) -> None:
        if self._job is not None:
            return
        registry = self.registry
        self._busy(f"Importing {path.name} (hashing it once)…")

        def job(ctx: JobContext) -> tuple[ModelRecord, str | None]:
            from sqale_desktop.core.models.gguf_info import GgufUnreadable, fitness_warning, read_gguf_info

            record = registry.import_file(path, progress=lambda done, total: ctx.progress((done, total)))
            try:  # said at once, where the file was chosen, not only at the first question
                warning = fitness_warning(read_gguf_info(record.path), record.source_checkpoint)
            except GgufUnreadable as exc:
                warning = str(exc)
            return record, warning

        def imported(result: tuple[ModelRecord, str | None]) -> None:
            record, warning = result
            self._done(" ".join(filter(None, [f"Imported {record.id}.", warning])), changed=True)
            if self.in_use_id() == record.id:  # the first model, or the settings' own: in use now
                self._keep(record.id)

        self._job = self._pool.start(
            job, finished=imported, failed=lambda exc: self._done(str(exc)), progress=self._bytes_progress
        )

    def _keep(self, model_id: str) -> None:
        """``model_id`` is the model in use: marked so, and named in the settings if it was not."""
        if model_id != self.active_model_id:
            self.active_model_id = model_id
            self.model_kept.emit(model_id)
        self.refresh()

    # download -------------------------------------------------------------------------------
    def get_suggested(self) -> None:
        """One click: find the suggested checkpoint's GGUF build, download the suggested file with
        progress, and use it; when no build exists, say what converting would cost."""
        if self._job is not None or self._search_job is not None:
            return
        self._chain = True
        self.repo.clear()
        self.find_builds()

    def find_builds(self) -> None:
        """Ask the hub on the pool; installed-model actions (Import, Verify) stay usable meanwhile."""
        if self._search_job is not None:
            return
        checkpoint = str(self.checkpoint.currentData())
        repo = self.repo.text().strip()
        from sqale_desktop.core.models import hub

        def job(_ctx: JobContext) -> tuple[str, list[Any]]:
            found = repo or next(iter(hub.search_gguf_repos(checkpoint)), "")
            if not found:
                return "", []
            return found, hub.list_gguf_files(found)

        self.message.setText("Asking the hub…")
        self.find_button.setEnabled(False)
        self.get_button.setEnabled(False)
        self.download_button.setEnabled(False)
        self._search_job = self._pool.start(job, finished=self._found, failed=self._search_failed)

    def _search_over(self) -> None:
        self._search_job = None
        self.find_button.setEnabled(True)
        self.get_button.setEnabled(self._job is None)
        self.download_button.setEnabled(self._job is None)

    def _search_failed(self, exc: BaseException) -> None:
        self._search_over()
        self._chain = False
        self.message.setText(str(exc))

    def _found(self, result: tuple[str, list[Any]]) -> None:
        from sqale_desktop.core.models import hub

        self._search_over()
        repo, files = result
        self._files = files
        self.file.clear()
        if not repo or not files:
            self._chain = False
            estimate = conversion_estimate(os.cpu_count() or 1)
            self.message.setText(
                "No GGUF build of this checkpoint was found on the hub. Convert it on this computer "
                f"below (Convert). {estimate}"
            )
            self.convert_button.setFocus()
            return
        self.repo.setText(repo)
        for f in files:
            self.file.addItem(f"{f.name} ({_size(f.size)})", f.name)
        suggested = hub.suggest_file(files)
        if suggested is not None:
            self.file.setCurrentIndex(self.file.findData(suggested.name))
        self.message.setText(f"{len(files)} GGUF files in {repo}.")
        if self._chain and suggested is not None:
            self.download()

    def download(self) -> None:
        if self._job is not None:
            return
        repo = self.repo.text().strip()
        name = self.file.currentData()
        if not repo or not name:
            self.message.setText("Find a GGUF build first (or type its repository and press Find).")
            return
        from sqale_desktop.core.models.download import download_model
        from sqale_desktop.core.models.hub import hub_token

        checkpoint = str(self.checkpoint.currentData())
        registry = self.registry

        def job(ctx: JobContext) -> Any:
            return download_model(
                repo,
                str(name),
                token=hub_token(),
                source_checkpoint=checkpoint,
                registry=registry,
                progress=ctx.progress,
                cancel=ctx.cancel,
            )

        self._busy(f"Downloading {name}…")
        self._job = self._pool.start(
            job, finished=self._downloaded, failed=self._download_failed, progress=self._download_progress
        )

    def _downloaded(self, result: Any) -> None:
        chained, self._chain = self._chain, False
        self._done(" ".join([f"Installed {result.record.id}.", *result.notes]), changed=True)
        if chained:  # the one-click path ends with the model selected
            self.active_model_id = result.record.id
            self.model_chosen.emit(result.record.id)
            self.refresh()
            self.message.setText(f"Installed and using {result.record.id}; it loads on the next question.")

    def _download_failed(self, exc: BaseException) -> None:
        self._chain = False
        self._done(str(exc))

    # convert --------------------------------------------------------------------------------
    def ask_convert_folder(self) -> None:
        name = QFileDialog.getExistingDirectory(self, "Checkpoint folder (config.json, *.safetensors)")
        if name:
            self.convert_source.setText(name)

    def convert(self) -> None:
        """Convert the typed source (a local folder or a hub repo id), else the chosen checkpoint."""
        if self._job is not None:
            return
        from sqale_desktop.core.models.convert import ConvertOptions, convert_model
        from sqale_desktop.core.models.hub import hub_token

        typed = self.convert_source.text().strip()
        source: str | Path = str(self.checkpoint.currentData())
        if typed:
            source = Path(typed) if Path(typed).is_dir() else typed
        options = ConvertOptions(quant=str(self.quant.currentData()))
        registry = self.registry

        def job(ctx: JobContext) -> Any:
            token = None if isinstance(source, Path) else hub_token()
            return convert_model(
                source, options, token=token, registry=registry, progress=ctx.progress, cancel=ctx.cancel
            )

        self._busy(f"Converting {source} to {options.quant}…")
        self._job = self._pool.start(
            job,
            finished=lambda result: self._done(
                f"Installed {result.record.id if result.record else result.path.name} "
                f"({_size(result.size)}) in {sum(result.seconds.values()):.0f} s.",
                changed=True,
            ),
            failed=lambda exc: self._done(str(exc)),
            progress=self._convert_progress,
        )

    def _convert_progress(self, report: Any) -> None:
        if report.total > 0:
            self.progress.setValue(int(1000 * report.done / report.total))
        else:
            self.progress.setValue(0)
        if report.message:
            self.message.setText(report.message)

    def cancel(self) -> None:
        if self._job is not None:
            self._job.request_cancel()
            self.message.setText("Cancelling…")

    # progress -------------------------------------------------------------------------------
    def _busy(self, text: str) -> None:
        self.message.setText(text)
        self.progress.setValue(0)
        self.progress.show()
        self.cancel_button.setEnabled(True)
        for button in (
            self.download_button,
            self.get_button,
            self.verify_button,
            self.import_button,
            self.convert_button,
        ):
            button.setEnabled(False)

    def _done(self, text: str, changed: bool = False) -> None:
        self._job = None
        self.message.setText(text)
        self.cancel_button.setEnabled(False)
        for button in (self.import_button, self.convert_button):
            button.setEnabled(True)
        searching = self._search_job is not None
        for button in (self.download_button, self.find_button, self.get_button):
            button.setEnabled(not searching)
        self.progress.hide()  # the message says how it ended
        self.progress.setValue(0)
        self.refresh()
        if changed:
            self.models_changed.emit()

    def _bytes_progress(self, value: tuple[int, int]) -> None:
        done, total = value
        if total > 0:
            self.progress.setValue(int(1000 * done / total))

    def _download_progress(self, report: Any) -> None:
        if report.total > 0:
            self.progress.setValue(int(1000 * report.done / report.total))
        if report.message:
            self.message.setText(report.message)
        elif report.phase == "download":
            eta = f", {report.eta_s:.0f} s left" if report.eta_s is not None else ""
            speed = format_bytes(report.speed_bps, "MiB")
            self.message.setText(
                f"{_size(report.done)} of {_size(report.total)} at {speed}/s{eta}"
                + (" (stalled, retrying)" if report.stalled else "")
            )

    def done(self, result: int) -> None:
        """Closing the dialog cancels what it started (the pool is joined by the window)."""
        for job in (self._job, self._search_job):
            if job is not None:
                job.request_cancel()
        super().done(result)
