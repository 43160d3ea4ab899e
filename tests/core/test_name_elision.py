"""core.name_elision: names shortened to a width stay told apart (issue 31, issue 32 item 12)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import assume, given
from hypothesis import strategies as st

from sqale_desktop.core.name_elision import (
    ELLIPSIS,
    Label,
    branches,
    distinct_names,
    shorten,
    shown_labels,
)

# Names that share starts and ends, as a schema's do; "…" among them, as a hostile file may have.
name_text = st.text(alphabet="ab_A …", max_size=14)


def within(budget: int) -> Callable[[str, str], bool]:
    return lambda _name, text: len(text) <= budget


def least_budget(names: list[str]) -> int:
    """The room the module promises distinct names in: each name whole, or its start through the
    first character that differs from every other name, and "…"."""
    apart = branches(names)
    return max(min(len(name), apart[name] + 2) for name in names)


def test_a_name_that_fits_is_whole_and_one_that_does_not_keeps_its_end() -> None:
    assert shorten("customers", lambda t: len(t) <= 9) == "customers"
    assert shorten("PLBatteryAgent_EventBackward_Battery", lambda t: len(t) <= 12) == "…ard_Battery"
    assert shorten("abc", lambda t: len(t) <= 0) is None


def test_power_log_names_that_end_alike_get_the_window_where_they_part() -> None:
    names = [
        "PLAccountingOperator_EventBackward_PowerEvents",
        "PLAccountingOperator_EventForward_PowerEvents",
        "PLAccountingOperator_EventNone_PowerEvents",
    ]
    assert distinct_names(names, within(12)) == {
        "PLAccountingOperator_EventBackward_PowerEvents": "…Backw…vents",
        "PLAccountingOperator_EventForward_PowerEvents": "…Forwa…vents",
        "PLAccountingOperator_EventNone_PowerEvents": "…None_…vents",
    }


def test_a_window_too_narrow_for_the_difference_falls_back_to_the_literal_start() -> None:
    # "…bc" twice, and no window of three characters reaches the second one.
    assert distinct_names(["aXbc", "aYbc"], within(3)) == {"aXbc": "aX…", "aYbc": "aY…"}


def test_istat_columns_read_apart_once_their_notes_give_way() -> None:
    """The real file's columns (frictionless issue 811) with their type behind them: cut in the
    middle as the tree cut them, the first three read ``Codice Comun…INTEGER``."""
    names = [
        "Codice Comune numerico con 110 province (dal 2010 al 2016)",
        "Codice Comune numerico con 107 province (dal 2006 al 2009)",
        "Codice Comune numerico con 103 province (dal 1995 al 2005)",
        "Codice NUTS2 2010 (3) ",
        "Codice NUTS2 2021 (3) ",
    ]
    assert shown_labels([Label(name, 24, "  INTEGER") for name in names]) == [
        "…ince (dal 2010 al 2016)",
        "…ince (dal 2006 al 2009)",
        "…ince (dal 1995 al 2005)",
        "Codice NUTS2 2010 (3) ",  # not one letter of the note fits: it is left out, not "  …"
        "Codice NUTS2 2021 (3) ",
    ]


def test_a_foreign_key_note_is_cut_and_the_names_stay_whole() -> None:
    note = "  INTEGER  [FK → customers.customer_id]"
    texts = shown_labels([Label("customer_id", 24, note), Label("customer_ref", 24, note)])
    assert texts == ["customer_id  INTEGER  […", "customer_ref  INTEGER  …"]


def test_a_note_that_stays_is_kept_and_the_name_gives_way() -> None:
    texts = shown_labels([Label("PLAccountingOperator_Aggregate", 20, "  (view)", note_stays=True)])
    assert texts == ["…r_Aggregate  (view)"]


def test_a_name_on_rows_of_different_room_is_whole_where_it_fits() -> None:
    texts = shown_labels([Label("order_items_id", 20, "  INTEGER"), Label("order_items_id", 10, "  TEXT")])
    assert texts == ["order_items_id  INT…", "…_items_id"]


@given(st.lists(name_text, min_size=1, max_size=8, unique=True), st.integers(min_value=0, max_value=6))
def test_distinct_names_read_apart_when_their_starts_have_room(names: list[str], extra: int) -> None:
    budget = least_budget(names) + extra
    shown = distinct_names(names, within(budget))
    texts = [shown[name] for name in names]
    assert None not in texts
    assert len(set(texts)) == len(texts), shown
    for name, text in shown.items():
        assert text is not None and len(text) <= budget
        if len(name) <= budget:
            assert text == name
        else:
            assert ELLIPSIS in text


@given(
    st.lists(st.text(alphabet="ab_A ", max_size=14), min_size=1, max_size=6, unique=True),
    st.lists(st.sampled_from(["", "  TEXT", "  INTEGER  [FK → t.id]", "  (view)"]), min_size=6, max_size=6),
    st.integers(min_value=0, max_value=30),
)
def test_rows_with_different_names_read_apart(names: list[str], notes: list[str], extra: int) -> None:
    budget = least_budget(names) + extra
    pairs = zip(names, notes[: len(names)], strict=True)
    labels = [Label(name, budget, note, note_stays=note == "  (view)") for name, note in pairs]
    # A note that stays takes its room from the name: the names must still have theirs.
    assume(all(least_budget(names) + len(label.note) <= budget for label in labels if label.note_stays))
    texts = shown_labels(labels)
    wholes = [label.name + label.note for label in labels]
    assume(len(set(wholes)) == len(wholes))  # "a" + "  TEXT" is "a  TEXT" + "": alike unshortened
    assert len(set(texts)) == len(texts), list(zip(labels, texts, strict=True))
    for label, text in zip(labels, texts, strict=True):
        assert len(text) <= budget
        if len(label.name) + len(label.note) <= budget:
            assert text == label.name + label.note
        elif len(label.name) <= budget and not label.note_stays:
            assert text.startswith(label.name)
