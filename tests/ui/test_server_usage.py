"""The hosted provider as a first-class choice (issue 32 item 13): its preset in Settings, and each
answer's server-reported tokens and cost on its card, in ``ask --json`` and in ``eval run``'s
run.json and report, against a local server speaking the same API (tests/completion_server.py),
with usage that includes cached tokens and with a server that reports none."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from keyring.backends import fail

from sqale_desktop.cli import main
from sqale_desktop.core import secrets
from sqale_desktop.core import settings as settings_mod
from sqale_desktop.core.history import History
from sqale_desktop.core.providers import FEATHERLESS
from sqale_desktop.core.server_usage import format_usd
from sqale_desktop.ui.main_window import MainWindow
from sqale_desktop.ui.settings_dialog import SettingsDialog
from tests.completion_server import KEY, Script
from tests.ui.windows import open_page

QUESTION = "How many genres are there?"
GOLD = "SELECT COUNT(*) AS genres FROM Genre"
SCRIPT = [
    ['Tables first.\n</think>\n\n{"tool": "list_tables"}'],
    ["Count them.\n</think>\n\n", json.dumps({"tool": "submit_sql", "args": {"sql": GOLD}})],
]


@pytest.fixture
def memory_key() -> Iterator[None]:
    secrets.use_backend(fail.Keyring())  # no keyring: the key lives in memory for the session
    secrets.set_secret(secrets.SERVER_API_KEY, KEY)
    yield
    secrets.use_backend(None)


def expected(script: Script) -> tuple[int, int, int, float]:
    """What the scripted server reported over its requests (see completion_server: prompt tokens
    are the prompt's words, half of them cached, one completion token per chunk), and the cost at
    the default prices."""
    prompt = cached = output = 0
    for request, chunks in zip(script.requests, SCRIPT, strict=True):
        words = len(request["prompt"].split())
        prompt, cached, output = prompt + words, cached + words // 2, output + len(chunks)
    p = FEATHERLESS.prices
    cost = ((prompt - cached) * p.input + cached * p.cached_input + output * p.output) / 1e6
    return prompt, cached, output, cost


def served(script: Script, usage: bool = True) -> None:
    script.requests.clear()
    script.completions = [list(c) for c in SCRIPT]
    script.usage = usage


def test_the_preset_fills_the_providers_url_model_and_prices_and_the_key_goes_to_the_keyring(
    qtbot: Any, memory_key: None
) -> None:
    dialog = SettingsDialog(settings_mod.Settings())
    qtbot.addWidget(dialog)
    index = dialog.provider.findData(FEATHERLESS.key)
    assert index > 0 and "trl-lab/qwen3.5-2b-grpo-synsql" in dialog.provider.itemText(index)
    dialog.provider.setCurrentIndex(index)
    dialog.provider.activated.emit(index)  # what a choice in the drop-down emits
    assert dialog.engine.currentData() == "openai"
    assert dialog.server_url.text() == "https://api.featherless.ai/v1"
    assert dialog.server_model.text() == "trl-lab/qwen3.5-2b-grpo-synsql"
    assert (dialog.price_input.value(), dialog.price_cached_input.value(), dialog.price_output.value()) == (
        0.32,
        0.064,
        1.6,
    )
    assert dialog.n_ctx.value() <= 32_768
    dialog.server_model.setText("trl-lab/qwen3.5-2b-grpo-sqale")  # editable, as the page may change
    dialog.api_key.setText("fl-secret-key")
    dialog.accept()
    chosen = dialog.result_settings()
    assert (chosen.engine, chosen.server_url, chosen.server_model) == (
        "openai",
        "https://api.featherless.ai/v1",
        "trl-lab/qwen3.5-2b-grpo-sqale",
    )
    assert secrets.get_secret(secrets.SERVER_API_KEY) == "fl-secret-key"
    assert "fl-secret-key" not in json.dumps(settings_mod.to_dict(chosen))
    again = SettingsDialog(chosen)  # reopened: the preset is recognised by its URL
    qtbot.addWidget(again)
    assert again.provider.currentData() == FEATHERLESS.key


def test_each_answer_card_shows_the_servers_tokens_and_their_cost(
    qtbot: Any, chinook: Path, tmp_path: Path, server: tuple[str, Script], memory_key: None
) -> None:
    url, script = server
    settings = dataclasses.replace(
        settings_mod.Settings(), engine="openai", server_url=url, server_model=FEATHERLESS.model
    )
    window = MainWindow(settings, history=History(tmp_path / "history.sqlite"))  # the settings' runtime
    qtbot.addWidget(window)
    window.show()
    try:
        page = open_page(qtbot, window, chinook)
        for usage in (True, False):
            served(script, usage)
            page.chat.question.setPlainText(QUESTION)
            with qtbot.waitSignal(window.episode_finished, timeout=30_000):
                page.chat.ask_button.click()
                view = page.chat.current  # the question's episode, while it runs
            assert view is not None and view.answer is not None
            details = view.answer.details.text()
            assert [r["model"] for r in script.requests] == [FEATHERLESS.model] * 2  # the preset's id
            if usage:
                prompt, cached, output, cost = expected(script)
                assert (
                    f"{prompt:,} tokens in ({cached:,} cached) · {output:,} out · {format_usd(cost)}"
                    in details
                )
            else:
                assert "the server reported no token usage" in details and "$" not in details
    finally:
        assert window.shutdown()


def test_ask_json_carries_the_reported_usage_its_cost_and_where_the_prices_come_from(
    chinook: Path, server: tuple[str, Script], memory_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    url, script = server
    settings_mod.save(dataclasses.replace(settings_mod.Settings(), engine="openai", server_url=url))
    served(script)
    assert main(["ask", "--db", str(chinook), "--question", QUESTION, "--json", "--no-log"]) == 0
    usage = json.loads(capsys.readouterr().out)["stats"]["server_usage"]
    prompt, cached, output, cost = expected(script)
    assert (usage["input_tokens"], usage["cached_tokens"], usage["output_tokens"]) == (prompt, cached, output)
    assert (usage["requests"], usage["unreported"]) == (2, 0)
    assert usage["cost_usd"] == pytest.approx(cost)
    assert usage["prices"]["input"] == 0.32 and usage["prices"]["output"] == 1.6
    assert "default prices" in usage["prices"]["source"] and "Featherless" in usage["prices"]["source"]

    settings_mod.save(
        dataclasses.replace(settings_mod.Settings(), engine="openai", server_url=url, price_output=2.0)
    )
    served(script, usage=False)
    assert main(["ask", "--db", str(chinook), "--question", QUESTION, "--json", "--no-log"]) == 0
    usage = json.loads(capsys.readouterr().out)["stats"]["server_usage"]
    assert (usage["requests"], usage["unreported"], usage["input_tokens"]) == (2, 2, 0)
    assert usage["cost_usd"] is None  # unknown, not a low figure that looks exact
    assert usage["prices"]["output"] == 2.0 and usage["prices"]["source"] == "the prices in the settings"


def test_eval_run_totals_the_usage_in_run_json_and_the_report(
    chinook: Path,
    tmp_path: Path,
    server: tuple[str, Script],
    memory_key: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, script = server
    settings_mod.save(dataclasses.replace(settings_mod.Settings(), engine="openai", server_url=url))
    questions = tmp_path / "questions.json"
    record = {"id": 1, "db_id": "chinook", "db_path": str(chinook), "question": QUESTION, "gold_sql": GOLD}
    questions.write_text(json.dumps([record]), encoding="utf-8")
    served(script)
    run_dir = tmp_path / "run"
    assert main(["eval", "run", str(questions), "--out", str(run_dir)]) == 0
    prompt, cached, output, cost = expected(script)
    assert f"server usage of the run: {prompt:,} tokens in ({cached:,} cached)" in capsys.readouterr().err
    totals = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["usage"]
    assert (totals["input_tokens"], totals["cached_tokens"], totals["output_tokens"]) == (
        prompt,
        cached,
        output,
    )
    assert totals["cost_usd"] == pytest.approx(cost)
    assert main(["eval", "report", str(run_dir)]) == 0
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "## Server usage" in report
    assert f"{prompt:,} input tokens ({cached:,} of them cached), {output:,} output tokens" in report
    assert f"cost {format_usd(cost)} at $0.32 input, $0.064 cached input, $1.6 output" in report
    assert "Server usage" in (run_dir / "report.html").read_text(encoding="utf-8")
