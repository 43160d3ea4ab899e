"""One way to write a byte size (issue 11): the window, the CLI and error messages agree."""

from __future__ import annotations

from sqale_desktop.core.units import GIB, MIB, format_bytes


def test_auto_picks_gib_from_one_gib_up() -> None:
    assert format_bytes(int(1.17 * GIB)) == "1.17 GiB"
    assert format_bytes(GIB) == "1.00 GiB"
    assert format_bytes(GIB - MIB) == "1023.0 MiB"
    assert format_bytes(int(12.34 * MIB)) == "12.3 MiB"
    assert format_bytes(0) == "0.0 MiB"


def test_a_unit_can_be_fixed_and_unknown_reads_a_question_mark() -> None:
    assert format_bytes(MIB // 2, "GiB") == "0.00 GiB"
    assert format_bytes(3 * GIB, "MiB") == "3072.0 MiB"
    assert format_bytes(None) == "?"
