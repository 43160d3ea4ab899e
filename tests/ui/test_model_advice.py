"""ModelAdvice alone: the chosen model's warnings, read on the pool, shown as keyed banners."""

from __future__ import annotations

import dataclasses
from typing import Any

from PySide6.QtWidgets import QWidget

from sqale_desktop.core.models.gguf_info import GgufInfo
from sqale_desktop.core.settings import Settings
from sqale_desktop.ui.banners import BannerStack
from sqale_desktop.ui.model_advice import ModelAdvice
from sqale_desktop.ui.workers import TaskPool

SMALL_LLAMA = GgufInfo(
    path="small.gguf",
    architecture="llama",
    name="Small",
    tokenizer_model="gpt2",
    tokenizer_pre="default",
    chat_template_has_think=False,
    context_length=8192,
    block_count=4,
)


class FakeSchemaModel:
    def __init__(self, tables: int) -> None:
        self._tables = [f"t{i}" for i in range(tables)]

    def countable_tables(self) -> list[str]:
        return self._tables


class FakePage:
    def __init__(self, tables: int) -> None:
        self.schema_model = FakeSchemaModel(tables)
        self.banners = BannerStack()


def make(qtbot: Any, settings: Settings) -> tuple[ModelAdvice, BannerStack, TaskPool, QWidget]:
    """The advice, its banners and pool, and their parent (keep it referenced: it owns them)."""
    window = QWidget()
    qtbot.addWidget(window)
    banners = BannerStack(window)
    pool = TaskPool(parent=window)
    return ModelAdvice(pool, banners, lambda: settings, window), banners, pool, window


def test_a_model_that_is_not_an_agent_gets_warnings_with_a_way_to_the_manager(qtbot: Any) -> None:
    advice, banners, pool, _window = make(qtbot, Settings())
    wanted: list[bool] = []
    advice.models_wanted.connect(lambda: wanted.append(True))
    try:
        with qtbot.waitSignal(advice.checked) as blocker:
            advice.show_info(SMALL_LLAMA, None, 16384)
        assert blocker.args == [SMALL_LLAMA]
        texts = banners.texts()
        assert "not one of the SQaLe agents" in texts["fitness"]
        assert "16,384" in texts["context"] and "8,192" in texts["context"]
        fitness = banners.banner("fitness")
        assert fitness is not None and fitness.action_button is not None
        fitness.action_button.click()
        assert wanted == [True]
    finally:
        assert pool.shutdown()


def test_checking_another_engine_clears_the_warnings_and_reads_nothing(qtbot: Any) -> None:
    advice, banners, pool, _window = make(qtbot, Settings(engine="openai"))
    checked: list[Any] = []
    advice.checked.connect(checked.append)
    try:
        advice.show_info(SMALL_LLAMA, None, 16384)
        advice.check()
        assert banners.texts() == {} and pool.active_jobs() == 0
        assert checked == [SMALL_LLAMA]  # only the direct call; no check ran
    finally:
        assert pool.shutdown()


def test_a_model_not_in_the_registry_is_checked_on_the_pool_without_warnings(qtbot: Any) -> None:
    advice, banners, pool, _window = make(qtbot, Settings(engine="llama", model_id="no-such-model"))
    try:
        with qtbot.waitSignal(advice.checked, timeout=10_000) as blocker:
            advice.check()
        assert blocker.args == [None] and banners.texts() == {}
    finally:
        assert pool.shutdown()


def test_the_large_schema_hint_follows_the_table_count_and_the_checkpoint(qtbot: Any) -> None:
    advice, _banners, pool, _window = make(qtbot, Settings())
    try:
        small, large = FakePage(tables=5), FakePage(tables=60)
        advice.large_schema_hint(small)  # type: ignore[arg-type]
        advice.large_schema_hint(large)  # type: ignore[arg-type]
        assert small.banners.texts() == {}
        assert "This database has 60 tables" in large.banners.texts()["large_schema"]
        # Already M_SQaLe (the checkpoint the registry recorded): no hint.
        advice.show_info(None, "trl-lab/qwen3.5-2b-grpo-sqale", 16384)
        again = FakePage(tables=60)
        advice.large_schema_hint(again)  # type: ignore[arg-type]
        assert again.banners.texts() == {}
    finally:
        assert pool.shutdown()


def test_settings_are_read_when_the_check_runs(qtbot: Any) -> None:
    settings = [Settings(engine="openai")]
    window = QWidget()
    qtbot.addWidget(window)
    pool = TaskPool(parent=window)
    advice = ModelAdvice(pool, BannerStack(window), lambda: settings[0], window)
    try:
        settings[0] = dataclasses.replace(settings[0], engine="llama", model_id="no-such-model")
        with qtbot.waitSignal(advice.checked, timeout=10_000):
            advice.check()
    finally:
        assert pool.shutdown()


def test_the_two_model_banners_are_compact_in_a_narrow_window(
    qtbot: Any, tmp_path: Any, artifacts: Any
) -> None:
    """Issue 20, item 13: in a 1024x700 window the fitness and context banners took ~100 px; one
    elided line each now (the whole text in the tooltip and behind Details…)."""
    from sqale_desktop.core.history import History
    from sqale_desktop.ui.main_window import MainWindow

    window = MainWindow(Settings(), None, history=History(tmp_path / "history.sqlite"))
    qtbot.addWidget(window)
    window.resize(1024, 700)
    window.show()
    with qtbot.waitSignal(window.model_advice.checked):
        window.model_advice.show_info(SMALL_LLAMA, None, 16384)
    stack = window.model_banners
    qtbot.waitUntil(lambda: set(stack.texts()) == {"fitness", "context"})
    fitness, context = stack.banner("fitness"), stack.banner("context")
    assert fitness is not None and context is not None
    # Laid out: both shown, one under the other, the stack as tall as the two.
    qtbot.waitUntil(
        lambda: (
            context.isVisible()
            and context.geometry().top() > fitness.geometry().bottom()
            and stack.height() >= fitness.height() + context.height()
        )
    )
    assert fitness.details.isVisible()
    assert fitness.label.toolTip() == window.model_banners.texts()["fitness"]
    window.grab().save(str(artifacts / "model_banners_1024.png"))
    assert stack.height() <= 60, stack.height()
    assert window.width() == 1024
    assert window.shutdown()
