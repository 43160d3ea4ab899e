"""Settings dialog, model manager and palettes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication

from sqale_desktop.core import secrets
from sqale_desktop.core.models.registry import Registry
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.model_manager import ModelManagerDialog
from sqale_desktop.ui.palette import apply_theme, is_dark
from sqale_desktop.ui.settings_dialog import SettingsDialog
from sqale_desktop.ui.workers import TaskPool
from tests.ui.windows import smollm2


@pytest.fixture
def memory_secrets() -> Any:
    from keyring.backends import fail

    secrets.use_backend(fail.Keyring())
    yield
    secrets.use_backend(None)


def test_settings_dialog_round_trip(qtbot: Any, memory_secrets: Any, artifacts: Path) -> None:
    dialog = SettingsDialog(Settings())
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.grab().save(str(artifacts / "settings.png"))
    assert dialog.temperature.value() == pytest.approx(0.6) and dialog.top_k.value() == 20
    assert not dialog.server_url.isEnabled()  # local engine: server fields greyed out
    dialog.engine.setCurrentIndex(dialog.engine.findData("openai"))
    assert dialog.server_url.isEnabled()
    dialog.server_url.setText("http://127.0.0.1:9999/v1")
    dialog.api_key.setText("sk-test")
    dialog.gpu_mode.setCurrentIndex(dialog.gpu_mode.findData("count"))
    dialog.gpu_layers.setValue(12)
    dialog.temperature.setValue(1.0)
    dialog.time_limit.setValue(3)
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    assert "memory" in dialog.keyring_note.text() or "session" in dialog.keyring_note.text()
    dialog.accept()
    result = dialog.result_settings()
    assert result.engine == "openai" and result.server_url == "http://127.0.0.1:9999/v1"
    assert result.gpu_layers == 12 and result.temperature == 1.0 and result.query_time_limit_s == 3.0
    assert result.theme == "dark"
    assert secrets.get_secret(secrets.SERVER_API_KEY) == "sk-test"
    assert secrets.get_secret(secrets.HF_TOKEN) is None  # left empty: nothing stored
    dialog.reset_sampling()
    assert dialog.result_settings().temperature == pytest.approx(0.6)


def test_settings_spin_boxes_use_the_loaders_limits(qtbot: Any) -> None:
    """The dialog cannot produce a value the settings loader would reject (issue 11)."""
    from sqale_desktop.core.settings import LIMITS

    dialog = SettingsDialog(Settings())
    qtbot.addWidget(dialog)
    boxes = {
        "gpu_layers": dialog.gpu_layers, "n_threads": dialog.threads, "n_ctx": dialog.n_ctx,
        "temperature": dialog.temperature, "top_p": dialog.top_p, "top_k": dialog.top_k,
        "min_p": dialog.min_p, "query_time_limit_s": dialog.time_limit, "max_rows": dialog.max_rows,
        "turn_tool_time_s": dialog.tool_budget,
        "query_memory_limit_mb": dialog.memory_limit,
        "import_cache_limit_mb": dialog.cache_limit, "import_write_limit_mb": dialog.write_limit,
        "price_input": dialog.price_input, "price_cached_input": dialog.price_cached_input,
        "price_output": dialog.price_output,
    }  # fmt: skip
    assert set(boxes) == set(LIMITS)
    for name, box in boxes.items():
        assert (box.minimum(), box.maximum()) == pytest.approx(LIMITS[name]), name


def test_tool_budget_and_csv_formulas_round_trip(qtbot: Any) -> None:
    dialog = SettingsDialog(Settings())
    qtbot.addWidget(dialog)
    assert dialog.tool_budget.value() == 30.0 and not dialog.csv_formulas.isChecked()
    dialog.tool_budget.setValue(120)
    dialog.csv_formulas.setChecked(True)
    result = dialog.result_settings()
    assert (result.turn_tool_time_s, result.csv_formulas) == (120.0, "sanitize")


def test_speculation_and_thread_choices_explain_themselves_and_round_trip(qtbot: Any) -> None:
    dialog = SettingsDialog(Settings())
    qtbot.addWidget(dialog)
    assert dialog.speculation.currentData() == "off"  # the default (issue 14's figures did not hold)
    assert dialog.threads.value() == 0 and dialog.threads.specialValueText() == "Automatic (one per core)"
    assert "one thread fewer" in dialog.threads.toolTip()
    assert "without changing what the model writes" in dialog.speculation.toolTip()
    dialog.speculation.setCurrentIndex(dialog.speculation.findData("auto"))
    dialog.threads.setValue(3)
    result = dialog.result_settings()
    assert result.speculation == "auto" and result.n_threads == 3
    dialog.engine.setCurrentIndex(dialog.engine.findData("openai"))
    assert not dialog.speculation.isEnabled() and not dialog.threads.isEnabled()  # a server decides


def test_settings_dialog_keeps_the_hub_token_in_the_keyring(qtbot: Any, memory_secrets: Any) -> None:
    from sqale_desktop.core.models.hub import hub_token

    dialog = SettingsDialog(Settings())
    qtbot.addWidget(dialog)
    assert dialog.hub_token.echoMode() == dialog.hub_token.EchoMode.Password
    dialog.hub_token.setText("  test-hub-token  ")
    dialog.accept()
    assert hub_token() == "test-hub-token"  # what downloads of gated repositories send
    again = SettingsDialog(Settings())
    qtbot.addWidget(again)
    assert again.hub_token.text() == "test-hub-token"
    again.hub_token.setText("")
    again.accept()
    assert hub_token() is None


@pytest.fixture
def manager(qtbot: Any, tmp_path: Path) -> Iterator[ModelManagerDialog]:
    """A model manager over an empty registry in tmp_path; its pool must shut down cleanly."""
    pool = TaskPool()
    dialog = ModelManagerDialog(pool, registry=Registry(tmp_path / "models.json"))
    qtbot.addWidget(dialog)
    yield dialog
    assert pool.shutdown()


def test_model_manager_import_verify_remove(qtbot: Any, manager: ModelManagerDialog, artifacts: Path) -> None:
    dialog, registry = manager, manager.registry
    assert dialog.table.rowCount() == 0 and "No model installed" in dialog.message.text()
    # The first model imported is the one the app loads: marked in use, and named (model_kept).
    with qtbot.waitSignals([dialog.models_changed, dialog.model_kept], timeout=20_000):
        dialog.import_file(smollm2())
    assert dialog.table.rowCount() == 1
    assert dialog.table.item(0, 0).text() == "✓ SmolLM2-135M-Instruct.Q4_1.gguf — in use"
    qtbot.waitUntil(lambda: not dialog.busy)
    dialog.verify_selected()
    qtbot.waitUntil(lambda: dialog.message.text().startswith("OK"), timeout=20_000)
    dialog.show()
    dialog.grab().save(str(artifacts / "models.png"))
    # Use on the model in use changes nothing (it stays loaded; tests/ui/test_model_manager_flow.py).
    with qtbot.assertNotEmitted(dialog.model_chosen), qtbot.assertNotEmitted(dialog.model_kept):
        dialog.use_button.click()
    assert dialog.active_model_id == registry.list()[0].id
    assert dialog.message.text() == f"{registry.list()[0].id} is already in use."
    dialog.remove_selected()
    assert dialog.table.rowCount() == 0 and registry.list() == []


def test_download_failure_is_a_message_not_a_crash(
    qtbot: Any, manager: ModelManagerDialog, monkeypatch: Any
) -> None:
    from sqale_desktop.core.models import download
    from sqale_desktop.core.models.errors import HubUnavailable

    def unreachable(*_args: Any, **kwargs: Any) -> Any:
        kwargs["progress"](download.Progress("metadata", 0, 0, message="Asking the hub"))
        raise HubUnavailable("The Hugging Face hub could not be reached.")

    monkeypatch.setattr(download, "download_model", unreachable)
    dialog = manager
    dialog.repo.setText("someone/model-GGUF")
    dialog.file.addItem("model-Q4_K_M.gguf", "model-Q4_K_M.gguf")
    dialog.download()
    qtbot.waitUntil(lambda: "could not be reached" in dialog.message.text(), timeout=10_000)
    assert dialog.download_button.isEnabled() and not dialog.cancel_button.isEnabled()


def test_dark_palette_and_screenshot(qtbot: Any, chinook: Path, artifacts: Path, tmp_path: Path) -> None:
    from sqale_desktop.core.history import History
    from sqale_desktop.ui.main_window import MainWindow

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    original = app.palette()
    try:
        assert apply_theme(app, "dark")
        assert is_dark(app)
        window = MainWindow(Settings(), None, history=History(tmp_path / "h.sqlite"))
        qtbot.addWidget(window)
        window.show()
        with qtbot.waitSignal(window.database_opened, timeout=10_000) as blocker:
            window.open_database(chinook)
        page = blocker.args[0]
        with qtbot.waitSignal(page.sql.query_finished, timeout=10_000):
            page.open_sql(
                "select Name, Composer, Milliseconds from Track where Composer is null or TrackId < 5"
            )
        assert page.sql.editor.sql().startswith("SELECT")  # formatted
        window.grab().save(str(artifacts / "dark.png"))
        assert window.shutdown()
        assert not apply_theme(app, "light")
        assert not is_dark(app)
    finally:
        app.setPalette(original)


def test_download_progress_and_cancel(qtbot: Any, manager: ModelManagerDialog, monkeypatch: Any) -> None:
    from sqale_desktop.core.models import download
    from sqale_desktop.core.models.errors import DownloadCancelled

    def slow_download(*_args: Any, **kwargs: Any) -> Any:
        progress, cancel = kwargs["progress"], kwargs["cancel"]
        total = 1_000_000
        for done in range(0, total, 50_000):
            progress(download.Progress("download", done, total, speed_bps=2**20, eta_s=3.0))
            if cancel.wait(0.02):
                raise DownloadCancelled("Download cancelled; the partial file is kept to resume later.")
        raise AssertionError("the test cancels before the end")

    monkeypatch.setattr(download, "download_model", slow_download)
    dialog = manager
    dialog.repo.setText("someone/model-GGUF")
    dialog.file.addItem("model-Q4_K_M.gguf", "model-Q4_K_M.gguf")
    dialog.download()
    assert not dialog.download_button.isEnabled() and dialog.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: dialog.progress.value() >= 100, timeout=10_000)
    assert "MiB/s" in dialog.message.text()
    dialog.cancel_button.click()
    qtbot.waitUntil(lambda: "cancelled" in dialog.message.text().lower() and not dialog.busy, timeout=10_000)
    assert dialog.download_button.isEnabled() and not dialog.cancel_button.isEnabled()


def test_convert_a_local_checkpoint_from_the_model_manager(
    qtbot: Any, manager: ModelManagerDialog, tmp_path: Path
) -> None:
    """The dialog's Convert runs the real converter on the pool: GGUF written, quantized, installed."""
    from sqale_desktop.core.models.convert.tiny_checkpoint import write_tiny_checkpoint

    checkpoint = write_tiny_checkpoint(tmp_path / "tiny-checkpoint")
    dialog, registry = manager, manager.registry
    dialog.convert_source.setText(str(checkpoint))
    dialog.quant.setCurrentIndex(dialog.quant.findData("Q8_0"))
    with qtbot.waitSignal(dialog.models_changed, timeout=120_000):
        dialog.convert_button.click()
        assert not dialog.convert_button.isEnabled() and dialog.cancel_button.isEnabled()
    [record] = registry.list()
    assert record.origin == "convert" and Path(record.path).is_file()
    assert "Q8_0" in Path(record.path).name
    assert dialog.message.text().startswith("Installed")
    assert dialog.table.rowCount() == 1 and dialog.convert_button.isEnabled()


def test_converting_a_folder_that_is_no_checkpoint_is_a_message(
    qtbot: Any, manager: ModelManagerDialog, tmp_path: Path
) -> None:
    dialog, registry = manager, manager.registry
    (tmp_path / "empty").mkdir()
    dialog.convert_source.setText(str(tmp_path / "empty"))
    dialog.convert()
    qtbot.waitUntil(lambda: not dialog.busy, timeout=20_000)
    assert "config.json" in dialog.message.text()
    assert registry.list() == []


def test_the_gpu_device_setting_keeps_a_device_that_is_not_here_now(qtbot: Any) -> None:
    """Several GPUs: Settings names the one to use; on this machine (none) only Automatic and a
    device chosen earlier, which stays chosen until the person picks another."""
    dialog = SettingsDialog(Settings(gpu_device="Vulkan1"))
    qtbot.addWidget(dialog)
    labels = [dialog.gpu_device.itemText(i) for i in range(dialog.gpu_device.count())]
    assert labels[0] == "Automatic (the most free memory)"
    assert dialog.gpu_device.currentText() == "Vulkan1 (not found now)"
    assert dialog.result_settings().gpu_device == "Vulkan1"
    dialog.gpu_device.setCurrentIndex(0)
    assert dialog.result_settings().gpu_device == ""
    dialog.engine.setCurrentIndex(dialog.engine.findData("openai"))
    assert not dialog.gpu_device.isEnabled()  # a server chooses its own devices


def test_settings_show_the_import_cache_and_clear_what_is_not_open(qtbot: Any, tmp_path: Path) -> None:
    """Issue 32 item 7: the import cache's size in Settings, a Clear that keeps an open import,
    and the bound as a setting that round-trips."""
    from PySide6.QtCore import Qt

    from sqale_desktop.core.db import open_readonly
    from sqale_desktop.core.imports import import_source

    imported = []
    for name in ("kept", "cleared"):
        source = tmp_path / f"{name}.csv"
        source.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(2000)), encoding="utf-8")
        imported.append(import_source(source))
    kept, cleared = imported
    with open_readonly(kept.db_path) as db:
        dialog = SettingsDialog(Settings())
        qtbot.addWidget(dialog)
        assert "(2 imports)" in dialog.cache_used.text()
        assert "MiB" in dialog.cache_used.text()
        qtbot.mouseClick(dialog.clear_cache, Qt.MouseButton.LeftButton)
        assert "(1 import)" in dialog.cache_used.text()
        assert "freed" in dialog.cache_used.text() and "1 open kept" in dialog.cache_used.text()
        assert kept.db_path.exists() and not cleared.db_path.exists()
        assert db.execute("SELECT count(*) FROM kept").rows == [(2000,)]
    dialog.cache_limit.setValue(512)
    assert dialog.result_settings().import_cache_limit_mb == 512


def test_the_import_size_limit_round_trips(qtbot: Any) -> None:
    """The size cap on what one import writes (issue 30) is set in the dialog like the others."""
    dialog = SettingsDialog(Settings())
    qtbot.addWidget(dialog)
    assert dialog.write_limit.value() == Settings().import_write_limit_mb
    dialog.write_limit.setValue(512)
    assert dialog.result_settings().import_write_limit_mb == 512
