"""The model manager leads somewhere: one click from the first-run offer to a selected model (the
fake hub stands in for Hugging Face through HF_ENDPOINT), the choice explained with the paper's
figures, the 40+ tables hint, the active model marked, Import usable while the hub is asked."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QPushButton

from sqale_desktop.core import settings as settings_mod
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.history import History
from sqale_desktop.core.models import hub
from sqale_desktop.core.models.catalog import SQALE, SYNSQL
from sqale_desktop.core.models.registry import Registry
from sqale_desktop.core.runtime import Runtime
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.main_window import MainWindow
from sqale_desktop.ui.model_manager import ModelManagerDialog
from sqale_desktop.ui.workers import TaskPool
from tests.core.models.fakehub import FakeHub, FakeRepo
from tests.ui.replay_scripts import chinook_script
from tests.ui.runtimes import scripted
from tests.ui.windows import smollm2

GGUF_REPO = "someone/qwen3.5-2b-grpo-synsql-GGUF"
FILE = "qwen3.5-2b-grpo-synsql-Q4_K_M.gguf"


@pytest.fixture
def pool() -> Iterator[TaskPool]:
    pool = TaskPool()
    yield pool
    assert pool.shutdown()


def dialog_for(qtbot: Any, pool: TaskPool, tmp_path: Path, **kwargs: Any) -> ModelManagerDialog:
    dialog = ModelManagerDialog(pool, registry=Registry(tmp_path / "models.json"), **kwargs)
    qtbot.addWidget(dialog)
    return dialog


def test_one_click_finds_downloads_and_selects_the_suggested_build(
    qtbot: Any, pool: TaskPool, tmp_path: Path, fake_hub: FakeHub, artifacts: Path
) -> None:
    fake_hub.add(
        FakeRepo(
            GGUF_REPO,
            {FILE: b"GGUF" + os.urandom(200_000), "small-Q8_0.gguf": b"GGUF" + os.urandom(300_000)},
            lfs={FILE, "small-Q8_0.gguf"},
            tags=["gguf"],
            base_model=SYNSQL.repo_id,
        )
    )
    hub.forget_reachability()
    dialog = dialog_for(qtbot, pool, tmp_path)
    dialog.show()
    with qtbot.waitSignal(dialog.model_chosen, timeout=30_000) as chosen:
        dialog.get_suggested()
    record = dialog.registry.list()[0]
    assert chosen.args == [record.id] and dialog.active_model_id == record.id
    assert Path(record.path).name == FILE  # Q4_K_M was the suggestion, not the other file
    assert "using" in dialog.message.text()
    assert dialog.table.item(0, 0).text().startswith("✓ ")
    dialog.grab().save(str(artifacts / "models_one_click.png"))


def test_without_a_gguf_build_conversion_is_offered_with_its_cost(
    qtbot: Any, pool: TaskPool, tmp_path: Path, fake_hub: FakeHub
) -> None:
    hub.forget_reachability()
    dialog = dialog_for(qtbot, pool, tmp_path)
    dialog.get_suggested()
    qtbot.waitUntil(lambda: "No GGUF build" in dialog.message.text(), timeout=20_000)
    text = dialog.message.text()
    assert "Convert" in text and "4.6 GB" in text and "1.2 GB" in text and "minute" in text
    assert dialog.registry.list() == []


def test_the_choice_is_explained_and_a_large_database_gets_the_hint(
    qtbot: Any, pool: TaskPool, tmp_path: Path, artifacts: Path
) -> None:
    small = dialog_for(qtbot, pool, tmp_path, table_count=11)
    assert small.checkpoint.currentData() == SYNSQL.repo_id
    assert "66.3%" in small.explanation.text() and "50.7%" in small.explanation.text()
    assert "median 113 tables" in small.explanation.text()
    assert small.large_hint.isHidden()
    large = dialog_for(qtbot, pool, tmp_path, table_count=367)
    assert large.checkpoint.currentData() == SQALE.repo_id
    assert not large.large_hint.isHidden() and "367 tables" in large.large_hint.text()
    large.show()
    large.grab().save(str(artifacts / "models_large_schema.png"))


def test_the_active_model_is_marked(qtbot: Any, pool: TaskPool, tmp_path: Path) -> None:
    registry = Registry(tmp_path / "models.json")
    first = registry.import_file(smollm2())
    dialog = ModelManagerDialog(pool, registry=registry, active_model_id=first.id)
    qtbot.addWidget(dialog)
    assert dialog.table.item(0, 0).text().startswith("✓ ") and "in use" in dialog.table.item(0, 0).text()
    assert dialog.table.item(0, 0).font().bold()


def test_import_stays_usable_while_the_hub_is_asked(
    qtbot: Any, pool: TaskPool, tmp_path: Path, fake_hub: FakeHub
) -> None:
    hub.forget_reachability()
    dialog = dialog_for(qtbot, pool, tmp_path)
    dialog.find_builds()
    assert dialog.searching and not dialog.find_button.isEnabled()
    assert dialog.import_button.isEnabled()
    said: list[str] = []
    dialog.models_changed.connect(lambda: said.append(dialog.message.text()))
    with qtbot.waitSignal(dialog.models_changed, timeout=20_000):
        dialog.import_file(smollm2())
    qtbot.waitUntil(lambda: not dialog.searching, timeout=20_000)
    assert len(dialog.registry.list()) == 1 and dialog.find_button.isEnabled()
    # SmolLM2 is no SQaLe agent: the import says so right away.
    assert "not one of the SQaLe agents" in said[0]


def test_offline_find_fails_with_the_offline_message(
    qtbot: Any, pool: TaskPool, tmp_path: Path, hf_env: Path, monkeypatch: Any
) -> None:
    import socket

    from huggingface_hub import constants

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", url)
    hub.forget_reachability()
    dialog = dialog_for(qtbot, pool, tmp_path)
    dialog.find_builds()
    # No retries (tests/core/models/test_hub_offline.py): the message comes from the probe.
    qtbot.waitUntil(lambda: "offline" in dialog.message.text(), timeout=10_000)
    assert dialog.find_button.isEnabled() and dialog.import_button.isEnabled()


def test_the_first_run_offer_is_one_click(
    qtbot: Any, tmp_path: Path, fake_hub: FakeHub, monkeypatch: Any
) -> None:
    from sqale_desktop.core.history import History
    from sqale_desktop.core.settings import Settings
    from sqale_desktop.ui.main_window import MainWindow

    opened: list[ModelManagerDialog] = []

    def exec_(self: ModelManagerDialog) -> int:  # the modal loop, replaced: the test drives it
        opened.append(self)
        return 0

    monkeypatch.setattr(ModelManagerDialog, "exec", exec_)
    hub.forget_reachability()
    window = MainWindow(Settings(), None, history=History(tmp_path / "h.sqlite"))
    qtbot.addWidget(window)
    try:
        window.offer_model_download()
        assert window.offer.isVisible() or not window.isVisible()
        window.download_suggested_model()
        assert len(opened) == 1
        dialog = opened[0]
        # Found, downloaded, used: Get is under way for the suggested checkpoint.
        assert dialog.getting_suggested and dialog.checkpoint.currentData() == SYNSQL.repo_id
        qtbot.waitUntil(lambda: not dialog.searching, timeout=20_000)
        assert "No GGUF build" in dialog.message.text()  # this fake hub has none: conversion is offered
    finally:
        assert window.shutdown()


def window_with_models(qtbot: Any, tmp_path: Path, resolved: list[Settings]) -> MainWindow:
    """A window whose engine comes from a resolver (as ``run_app`` builds it), counting each
    rebuild: a rebuild is what drops the loaded model."""

    def resolve(settings: Settings) -> Runtime:
        resolved.append(settings)
        return scripted(lambda: ReplayEngine(chinook_script()), settings)

    window = MainWindow(
        Settings(),
        scripted(lambda: ReplayEngine(chinook_script())),
        resolve=resolve,
        history=History(tmp_path / "history.sqlite"),
    )
    qtbot.addWidget(window)
    window.show()
    return window


def in_models_dialog(qtbot: Any, window: MainWindow, steps: Callable[[ModelManagerDialog], None]) -> None:
    """Tools → Models… as a person opens it (the modal dialog), ``steps`` done in it, then Close."""
    done: list[BaseException | None] = []

    def drive() -> None:
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, ModelManagerDialog):
            QTimer.singleShot(20, drive)
            return
        try:
            steps(dialog)
            done.append(None)
        except BaseException as exc:  # re-raised outside the dialog's event loop
            done.append(exc)
        close = next(b for b in dialog.findChildren(QPushButton) if b.text() == "Close")
        qtbot.mouseClick(close, Qt.MouseButton.LeftButton)

    QTimer.singleShot(0, drive)
    window.show_models()
    assert done, "the model manager did not open"
    if done[0] is not None:
        raise done[0]


def test_an_imported_model_is_marked_in_use_and_named_in_the_settings(qtbot: Any, tmp_path: Path) -> None:
    resolved: list[Settings] = []
    window = window_with_models(qtbot, tmp_path, resolved)
    try:
        assert window.settings.model_id == ""

        def import_one(dialog: ModelManagerDialog) -> None:
            with qtbot.waitSignal(dialog.models_changed, timeout=20_000):
                dialog.import_file(smollm2())  # what the Import GGUF… file dialog leads to
            qtbot.waitUntil(lambda: dialog.table.item(0, 0).text().startswith("✓ "), timeout=5000)
            assert "in use" in dialog.table.item(0, 0).text()

        in_models_dialog(qtbot, window, import_one)
        [record] = Registry().list()
        assert window.settings.model_id == record.id
        assert settings_mod.load().settings.model_id == record.id  # kept for the next start
    finally:
        assert window.shutdown()


def test_use_on_the_model_in_use_keeps_it_loaded(qtbot: Any, tmp_path: Path) -> None:
    record = Registry().import_file(smollm2())  # installed earlier; the settings name no model
    resolved: list[Settings] = []
    window = window_with_models(qtbot, tmp_path, resolved)
    try:
        with qtbot.waitSignal(
            window.runner.engine_state, timeout=10_000, check_params_cb=lambda s, _d: s == "ready"
        ):
            window.runner.load_engine()
        engine = window.runner.worker.engine
        assert engine is not None

        def use_it(dialog: ModelManagerDialog) -> None:
            assert dialog.table.item(0, 0).text().startswith("✓ ")  # the model loaded by default
            qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)
            assert "already in use" in dialog.message.text()

        in_models_dialog(qtbot, window, use_it)
        assert window.settings.model_id == record.id
        assert resolved == [] and window.runner.worker.engine is engine  # not rebuilt, not unloaded
        # A second Use, with the settings naming it now: still nothing reloads.
        in_models_dialog(qtbot, window, use_it)
        assert resolved == [] and window.runner.worker.engine is engine
    finally:
        assert window.shutdown()


def test_after_an_import_no_download_bar_reads_full_and_the_title_is_the_menu_items(
    qtbot: Any, tmp_path: Path
) -> None:
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QGroupBox, QProgressBar

    from sqale_desktop.ui.main_window import MODEL_MANAGER_ACTION

    resolved: list[Settings] = []
    window = window_with_models(qtbot, tmp_path, resolved)
    try:
        seen: dict[str, Any] = {}

        def import_one(dialog: ModelManagerDialog) -> None:
            seen["title"] = dialog.windowTitle()
            download = next(g for g in dialog.findChildren(QGroupBox) if g.title().startswith("Download"))
            seen["bars_in_download"] = download.findChildren(QProgressBar)
            seen["idle_bar_shown"] = dialog.progress.isVisible()
            with qtbot.waitSignal(dialog.models_changed, timeout=20_000):
                dialog.import_file(smollm2())
                seen["busy_bar_shown"] = dialog.progress.isVisible()
            seen["after"] = (dialog.progress.isVisible(), dialog.message.text())

        in_models_dialog(qtbot, window, import_one)
        action = window.findChild(QAction, "model_manager")
        assert action is not None and action.text() == MODEL_MANAGER_ACTION
        assert seen["title"] == MODEL_MANAGER_ACTION.replace("&", "").rstrip("…")
        assert seen["bars_in_download"] == []  # the Download box holds no bar an import fills
        assert not seen["idle_bar_shown"] and seen["busy_bar_shown"]
        shown, said = seen["after"]
        assert not shown and said.startswith("Imported ")
    finally:
        assert window.shutdown()
