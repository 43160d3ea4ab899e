"""llama.cpp's log goes to the app's log file, not to the terminal (issue 20, item 14)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sqale_desktop.core import logs
from sqale_desktop.core.engines.llama import native_log
from tests.core.engines.llama_helpers import GREEDY, CancelInChunk, long_turn_pending, run, small_engine

# enum ggml_log_level
DEBUG, INFO, WARN, ERROR, CONT = 1, 2, 3, 4, 5


def test_pieces_are_joined_into_lines_below_warning(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []
    native_log.listen(seen.append)
    try:
        with caplog.at_level(logging.DEBUG, logger="llama.cpp"):
            native_log.receive(INFO, "llama_model_load: loading")
            native_log.receive(CONT, ".")
            native_log.receive(CONT, ".\n")
            native_log.receive(WARN, "decode: removing memory module entries for seq_id = 0\n")
            native_log.receive(ERROR, "failed to allocate\nsecond line\n")
            native_log.receive(DEBUG, "a detail\n")
    finally:
        native_log.unlisten(seen.append)
    assert seen == [
        "llama_model_load: loading..",
        "decode: removing memory module entries for seq_id = 0",
        "failed to allocate",
        "second line",
        "a detail",
    ]
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "llama.cpp"]
    assert records == [
        (logging.DEBUG, "llama_model_load: loading.."),
        (logging.INFO, "warning: decode: removing memory module entries for seq_id = 0"),
        (logging.INFO, "error: failed to allocate"),
        (logging.INFO, "error: second line"),
        (logging.DEBUG, "a detail"),
    ]
    # Nothing llama.cpp says is a warning of the app's: the terminal shows WARNING and up.
    assert all(level < logging.WARNING for level, _ in records)


@pytest.mark.usefixtures("reset_logging")
def test_a_cancelled_prefill_logs_to_the_file_and_prints_nothing(
    tiny_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """After Stop, llama.cpp warns "removing memory module entries": the log file gets it, stderr does not."""
    log_file = logs.configure()
    engine = small_engine(tiny_path)
    try:
        session = long_turn_pending(engine)
        aborted = engine.counters.aborted_chunks
        run(session, 4, GREEDY, CancelInChunk(engine, chunks=1))
        assert engine.counters.aborted_chunks == aborted + 1
    finally:
        engine.close()
    for handler in logging.getLogger().handlers:
        handler.flush()
    written = log_file.read_text(encoding="utf-8")
    assert "llama.cpp: warning: decode: removing memory module entries" in written
    assert "llama_model_loader" not in written  # load chatter is DEBUG: not kept unless --verbose
    terminal = capfd.readouterr()
    assert "removing memory module entries" not in terminal.err + terminal.out
    assert "llama_" not in terminal.err
