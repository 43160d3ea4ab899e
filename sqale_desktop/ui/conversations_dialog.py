"""Stored conversations, one per database file ever opened, with a way to delete them.

The history store keeps every conversation (``core.history``); without this dialog the only way to
forget one would be deleting the app's data folder.  Deleting removes its questions, episode traces
and query history; the database file itself is never touched.  Open (or a double-click) opens the
conversation's database in a tab, where the conversation comes back; a data file's conversation
opens the data file (imported again if it changed), never its copy in the import cache.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core.imports.copies import source_of_copy

PATH_ROLE = Qt.ItemDataRole.UserRole + 1
"""The file to open for the item: the database, or the data file (CSV, workbook, folder) that was
imported, which opening imports again if it changed."""


class ConversationsDialog(QDialog):
    """The list (most recently active first), Open and Delete.

    Signals:
        deleted(int): a conversation's id, after it was deleted from the store.
        open_requested(str): the database file of the conversation to open (the dialog closes).
    """

    deleted = Signal(int)
    open_requested = Signal(str)

    def __init__(self, history: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Stored conversations")
        self.history = history
        self.list = QListWidget(self)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.delete_button = QPushButton("Delete…", self)
        self.delete_button.clicked.connect(lambda: self.delete_selected())
        self.open_button = QPushButton("Open", self)
        self.open_button.setToolTip("Open this conversation's database in a tab")
        self.open_button.clicked.connect(lambda: self.open_selected())
        self.list.itemDoubleClicked.connect(lambda _item: self.open_selected())
        self.list.itemSelectionChanged.connect(self._selection_changed)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.addButton(self.open_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.delete_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Questions, answers and query history kept per database file:", self))
        layout.addWidget(self.list, 1)
        layout.addWidget(buttons)
        self.resize(560, 360)
        self.refresh()

    def refresh(self) -> None:
        self.list.clear()
        for conversation in self.history.list_conversations():
            when = conversation.updated_at.astimezone().strftime("%Y-%m-%d %H:%M")
            # Kept by an older version under an import's cache copy: it is about the source.
            source = source_of_copy(conversation.db_path)
            path = str(source) if source is not None else conversation.db_path
            title = source.name if source is not None else conversation.title
            item = QListWidgetItem(f"{title}  —  last used {when}")
            item.setToolTip(path)
            item.setData(Qt.ItemDataRole.UserRole, conversation.id)
            item.setData(PATH_ROLE, path)
            self.list.addItem(item)
        self.delete_button.setEnabled(self.list.count() > 0)
        self._selection_changed()

    def _selection_changed(self) -> None:
        self.open_button.setEnabled(len(self.list.selectedItems()) == 1)

    def open_selected(self) -> str | None:
        """Open the selected conversation's database (the dialog closes); its path, or None."""
        items = self.list.selectedItems()
        if len(items) != 1:
            return None
        path = str(items[0].data(PATH_ROLE))
        self.open_requested.emit(path)
        self.accept()
        return path

    def delete_selected(self, confirm: bool = True) -> int:
        """Delete the selected conversations; returns how many."""
        ids = [int(item.data(Qt.ItemDataRole.UserRole)) for item in self.list.selectedItems()]
        if not ids:
            return 0
        if confirm:
            answer = QMessageBox.question(
                self,
                "Delete conversations",
                f"Delete {len(ids)} conversation{'s' if len(ids) != 1 else ''} with their questions, "
                "answers and query history? The database files are not touched.",
            )
            if answer != QMessageBox.StandardButton.Yes:
                return 0
        for conversation_id in ids:
            try:
                self.history.delete_conversation(conversation_id)
            except KeyError:
                continue  # deleted meanwhile
            self.deleted.emit(conversation_id)
        self.refresh()
        return len(ids)
