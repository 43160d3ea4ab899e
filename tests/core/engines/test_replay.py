"""The replay engine: scripted completions streamed like a model would."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from sqale_desktop.core.engines.base import EngineError, SamplingParams
from sqale_desktop.core.engines.replay import ReplayEngine, count_tokens, load_script

SAMPLING = SamplingParams()


def test_each_generate_plays_the_next_completion_in_small_chunks() -> None:
    engine = ReplayEngine(["first completion", "second"], chunk_chars=4)
    session = engine.new_session("PROMPT")
    chunks = list(session.generate(100, SAMPLING, threading.Event()))
    assert chunks == ["firs", "t co", "mple", "tion"]
    session.end_turn()
    session.append("\nNEXT\n")
    assert "".join(session.generate(100, SAMPLING, threading.Event())) == "second"
    assert session.last_finish_reason == "stop"
    assert session.prompt_text == "PROMPTfirst completion<|im_end|>\nNEXT\nsecond"
    assert list(session.generate(100, SAMPLING, threading.Event())) == []  # script exhausted


def test_every_session_starts_from_the_top_of_the_script() -> None:
    engine = ReplayEngine(["a", "b"])
    for _ in range(2):
        session = engine.new_session("")
        assert "".join(session.generate(10, SAMPLING, threading.Event())) == "a"


def test_max_tokens_cuts_the_completion_with_finish_reason_length() -> None:
    session = ReplayEngine(["one two three four five"]).new_session("")
    assert "".join(session.generate(3, SAMPLING, threading.Event())) == "one two three "
    assert session.last_finish_reason == "length"
    assert session.stats.completion_tokens == 3


def test_a_scripted_stop_string_ends_the_completion() -> None:
    session = ReplayEngine(["answer<|im_end|>ignored"]).new_session("")
    assert "".join(session.generate(100, SAMPLING, threading.Event())) == "answer"


def test_token_counts_cover_prompt_and_completions() -> None:
    session = ReplayEngine([" x y"]).new_session("a b c")
    list(session.generate(100, SAMPLING, threading.Event()))
    session.end_turn()
    assert session.stats.completion_tokens == 2
    assert session.stats.prompt_tokens == count_tokens(session.prompt_text)
    assert session.stats.evaluated_tokens == session.stats.prompt_tokens


def test_cancel_stops_the_stream_between_chunks() -> None:
    engine = ReplayEngine(["x" * 1000], chunk_chars=1, delay=0.01)
    session = engine.new_session("")
    cancel = threading.Event()
    received: list[str] = []
    for chunk in session.generate(10_000, SAMPLING, cancel):
        received.append(chunk)
        if len(received) == 3:
            threading.Timer(0.02, cancel.set).start()
    assert 3 <= len(received) < 1000
    assert session.last_finish_reason == "cancelled"


def test_scripts_load_from_a_list_or_a_recorded_episode(tmp_path: Path) -> None:
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(["a", "b"]))
    recorded = tmp_path / "episode.json"
    recorded.write_text(
        json.dumps({"question": "q", "turns": [{"completion": "c1", "calls": []}, {"completion": "c2"}]})
    )
    assert load_script(plain) == ["a", "b"]
    assert load_script(recorded) == ["c1", "c2"]
    assert ReplayEngine.from_file(plain).describe() == "replay (2 scripted turns)"


@pytest.mark.parametrize("content", ["{broken", json.dumps({"a": 1}), json.dumps(["a", 2])])
def test_unusable_script_files_raise_engine_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(EngineError, match="replay file"):
        load_script(path)
    with pytest.raises(EngineError, match="cannot read"):
        load_script(tmp_path / "missing.json")
