"""Formula cells whose cached value is an error (#DIV/0!, #N/A…): python-calamine hands them over
empty, so a sheet of them was refused as holding no cells; they import as their error text, and as
NULL in a column that is otherwise numbers (with a note either way)."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core.imports import import_source
from sqale_desktop.core.imports.sheet_errors import WorkbookErrors

pytestmark = pytest.mark.usefixtures("untouched")

ERRORS = "excel/calamine__errors.xlsx"
_SHEET = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>{doctype}<worksheet xmlns='
    '"http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>{rows}</sheetData></worksheet>'
)


def _text(ref: str, value: str) -> str:
    return f'<c r="{ref}" t="inlineStr"><is><t>{value}</t></is></c>'


def _number(ref: str, value: str) -> str:
    return f'<c r="{ref}"><v>{value}</v></c>'


def _error(ref: str, value: str) -> str:
    return f'<c r="{ref}" t="e"><f>1/0</f><v>{value}</v></c>'


def workbook_like_errors(files: Path, path: Path, rows: list[list[str]], doctype: str = "") -> Path:
    """The real errors workbook with its first sheet's cells replaced by ``rows`` (cells' XML)."""
    numbered = "".join(f'<row r="{i}">{"".join(cells)}</row>' for i, cells in enumerate(rows, 1))
    return with_sheet(files, path, _SHEET.format(doctype=doctype, rows=numbered))


def with_sheet(files: Path, path: Path, sheet: str) -> Path:
    """The real errors workbook with ``sheet`` as its first sheet's XML."""
    with zipfile.ZipFile(files / ERRORS) as source, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for item in source.infolist():
            data = sheet.encode() if item.filename == "xl/worksheets/sheet1.xml" else source.read(item)
            out.writestr(item.filename, data)
    return path


def test_a_sheet_of_formula_errors_imports_their_text(files: Path, rows: Any) -> None:
    result = import_source(files / ERRORS)
    assert [t.name for t in result.tables] == ["Feuil1"]
    # The sheet has no header row: its first cell names the column, as a CSV's first line would.
    assert rows(result.db_path, 'SELECT name, type FROM pragma_table_info("Feuil1")') == [("#DIV/0!", "TEXT")]
    assert rows(result.db_path, 'SELECT "#DIV/0!" FROM Feuil1 ORDER BY rowid') == [
        ("#NAME?",),
        ("#VALUE!",),
        ("#NULL!",),
        ("#REF!",),
        ("#NUM!",),
        ("#N/A",),
    ]
    assert (
        "Feuil1: column '#DIV/0!': 6 formula error cell(s) (#N/A, #NAME?, #NULL!, #NUM!, #REF!, "
        "#VALUE!), kept as their error text" in result.notes
    )
    assert any("Feuil2 (empty), Feuil3 (empty)" in note for note in result.notes)


def test_an_error_among_numbers_is_null_and_the_column_stays_numbers(
    files: Path, tmp_path: Path, rows: Any
) -> None:
    path = workbook_like_errors(
        files,
        tmp_path / "prices.xlsx",
        [
            [_text("A1", "item"), _text("B1", "price"), _text("C1", "note")],
            [_text("A2", "tea"), _number("B2", "3"), _text("C2", "fine")],
            [_text("A3", "cake"), _error("B3", "#DIV/0!"), _error("C3", "#N/A")],
            [_text("A4", "jam"), _number("B4", "5"), _text("C4", "fine")],
        ],
    )
    result = import_source(path)
    types = dict(rows(result.db_path, 'SELECT name, type FROM pragma_table_info("Feuil1")'))
    assert types == {"item": "TEXT", "price": "INTEGER", "note": "TEXT"}
    assert rows(result.db_path, "SELECT item, price, note FROM Feuil1 ORDER BY rowid") == [
        ("tea", 3, "fine"),
        ("cake", None, "#N/A"),
        ("jam", 5, "fine"),
    ]
    assert rows(result.db_path, "SELECT sum(price), avg(price) FROM Feuil1") == [(8, 4.0)]
    assert (
        "Feuil1: column 'price': 1 formula error cell(s) (#DIV/0!), NULL in this INTEGER column"
        in result.notes
    )
    assert "Feuil1: column 'note': 1 formula error cell(s) (#N/A), kept as their error text" in result.notes


def test_the_text_an_error_cell_holds_is_not_a_number_s_text(files: Path, tmp_path: Path, rows: Any) -> None:
    """A cell typed as the text '#N/A' is a person's text, not a formula error: the column is text."""
    path = workbook_like_errors(
        files,
        tmp_path / "typed.xlsx",
        [[_text("A1", "n")], [_number("A2", "1")], [_text("A3", "#N/A")], [_error("A4", "#N/A")]],
    )
    result = import_source(path)
    assert rows(result.db_path, "SELECT n FROM Feuil1 ORDER BY rowid") == [("1",), ("#N/A",), ("#N/A",)]


def test_a_sheet_with_a_document_type_declaration_is_not_read_for_errors(files: Path, tmp_path: Path) -> None:
    """Entity declarations (a billion laughs) are refused before any is expanded: the sheet's
    error cells are then left as calamine gives them."""
    laughs = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    doctype = f'<!DOCTYPE worksheet [<!ENTITY l0 "lol">{laughs}]>'
    path = workbook_like_errors(
        files, tmp_path / "laughs.xlsx", [[_text("A1", "n")], [_error("A2", "#DIV/0!")]], doctype
    )
    assert WorkbookErrors(path).of_sheet("Feuil1") == {}
    without = workbook_like_errors(
        files, tmp_path / "plain.xlsx", [[_text("A1", "n")], [_error("A2", "#DIV/0!")]]
    )
    assert WorkbookErrors(without).of_sheet("Feuil1") == {1: {0: "#DIV/0!"}}


def test_rows_and_cells_without_their_reference_are_placed_in_order(files: Path, tmp_path: Path) -> None:
    """The format lets a row and a cell leave out ``r``: each then follows the one before it
    (the sheet is then parsed whole, not row by row)."""
    rows = [
        '<row><c t="inlineStr"><is><t>a</t></is></c><c t="inlineStr"><is><t>b</t></is></c></row>',
        '<row><c><v>1</v></c><c t="e"><v>#N/A</v></c></row>',
        '<row r="5"><c t="e"><v>#REF!</v></c><c><v>2</v></c></row>',
    ]
    path = with_sheet(files, tmp_path / "unnumbered.xlsx", _SHEET.format(doctype="", rows="".join(rows)))
    assert WorkbookErrors(path).of_sheet("Feuil1") == {1: {1: "#N/A"}, 4: {0: "#REF!"}}
