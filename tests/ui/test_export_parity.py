"""The grid's clipboard copy, its file export and ``sqale-desktop query --format`` write the same
bytes for the same result (issue 11, "one exporter").

A real SqlPanel runs the query on a real file; the clipboard is read back through Qt.  The result
holds NULL, BLOBs, quotes, commas, tabs and line breaks in text, 64-bit integers, exact floats,
infinities and non-UTF-8 text (``tests/awkward_result.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QItemSelectionModel
from PySide6.QtGui import QGuiApplication

from sqale_desktop.cli import main
from sqale_desktop.core.export_formats import platform_newline
from sqale_desktop.ui.result_model import display_value
from sqale_desktop.ui.sql_panel import SqlPanel
from tests.awkward_result import QUERY, make_database
from tests.ui.sql_panels import shown_panel

NL = platform_newline()


def _refuse_constant(name: str) -> object:
    raise ValueError(f"not JSON: {name}")


def _exact(text: str) -> Any:
    """Strict JSON with floats kept as their text, so equal values mean equal digits."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=lambda s: ("float", s))


@pytest.fixture
def panel(qtbot: Any, tmp_path: Path) -> Iterator[SqlPanel]:
    with shown_panel(qtbot, make_database(tmp_path / "awkward.db")) as panel:
        with qtbot.waitSignal(panel.query_finished, timeout=10_000):
            panel.run(QUERY)
        yield panel


def _export(qtbot: Any, panel: SqlPanel, path: Path, fmt: str, newline: str) -> str:
    with qtbot.waitSignal(panel.export_finished, timeout=10_000) as blocker:
        panel.export(path, fmt, newline=newline)  # type: ignore[arg-type]
    assert blocker.args == [str(path), 8]
    return path.read_bytes().decode("utf-8")


def _cli(capsys: pytest.CaptureFixture[str], db: Path, fmt: str) -> str:
    capsys.readouterr()
    assert main(["query", "--db", str(db), QUERY, "--format", fmt]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["csv", "tsv", "json"])
def test_clipboard_file_and_cli_agree(
    fmt: str, qtbot: Any, panel: SqlPanel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    panel.grid.selectionModel().clear()
    clipboard = panel.grid.copy_as(fmt, header=True)  # type: ignore[arg-type]
    assert QGuiApplication.clipboard().text() == clipboard
    as_file = _export(qtbot, panel, tmp_path / f"platform.{fmt}", fmt, NL)
    assert as_file == clipboard + NL  # the clipboard only leaves off the last line ending
    lf_file = _export(qtbot, panel, tmp_path / f"lf.{fmt}", fmt, "\n")
    out = _cli(capsys, tmp_path / "awkward.db", fmt)
    if fmt != "json":
        assert out == lf_file
        return
    for text in (clipboard, as_file, out):
        assert "Infinity" not in text and "NaN" not in text
        json.loads(text, parse_constant=_refuse_constant)
    records = _exact(lf_file)
    document = _exact(out)
    assert document["rows"] == [[r[c] for c in document["columns"]] for r in records]
    assert records[0]["blob"] == "X'00FF10'" and records[3]["real"] == "inf"


def test_ctrl_c_on_every_cell_is_copy_as_tsv(qtbot: Any, panel: SqlPanel) -> None:
    model = panel.grid.model()
    selection = panel.grid.selectionModel()
    for r in range(model.rowCount()):
        for c in range(model.columnCount()):
            selection.select(model.index(r, c), QItemSelectionModel.SelectionFlag.Select)
    copied = panel.grid.copy_selection()
    assert copied == panel.grid.copy_as("tsv", header=False)  # "Copy": the cells, no header row
    assert "X'00FF10'" in copied and "<blob" not in copied


def test_markdown_copy_is_the_cli_markdown(
    qtbot: Any, panel: SqlPanel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    panel.grid.selectionModel().clear()
    clipboard = panel.grid.copy_as("markdown", header=True)
    out = _cli(capsys, tmp_path / "awkward.db", "markdown")
    assert out == clipboard.replace(NL, "\n") + "\n"  # a Markdown cell holds no raw line break


def test_the_grid_displays_a_blob_but_copies_its_bytes(panel: SqlPanel) -> None:
    """The boundary: ``<blob 3 bytes>`` is what the cell shows, never what leaves the app."""
    model = panel.grid.model()
    assert model.index(0, 3).data() == display_value(b"\x00\xff\x10") == "<blob 3 bytes>"
    panel.grid.selectionModel().clear()
    panel.grid.selectionModel().select(model.index(0, 3), QItemSelectionModel.SelectionFlag.Select)
    assert panel.grid.copy_selection() == "X'00FF10'"
