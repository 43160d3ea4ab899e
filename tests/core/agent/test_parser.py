"""The completion parser: lenient about form, strict about what runs, never raising."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from sqale_desktop.core.agent.parser import extract_final_sql, find_calls, parse_completion, split_think
from sqale_desktop.core.tools.specs import TOOL_NAMES


def _calls(text: str) -> list[tuple[str, dict[str, object], str | None]]:
    return [(c.tool, c.args, c.error) for c in parse_completion(text).calls]


def test_several_objects_on_one_line_are_all_calls_in_order() -> None:
    text = 'plan</think>\n{"tool": "list_tables"} {"tool": "describe_table", "args": {"table_name": "Album"}}'
    assert _calls(text) == [("list_tables", {}, None), ("describe_table", {"table_name": "Album"}, None)]


def test_code_fences_and_trailing_prose_are_ignored() -> None:
    text = (
        "</think>\nHere you go:\n```json\n"
        '{"tool": "run_query", "args": {"sql": "SELECT 1"}}\n```\nThat should work.'
    )
    assert _calls(text) == [("run_query", {"sql": "SELECT 1"}, None)]


def test_json_inside_the_think_block_is_not_a_call() -> None:
    text = '<think>maybe {"tool": "list_tables"}?</think>{"tool": "sample_rows", "args": {"table_name": "t"}}'
    assert _calls(text) == [("sample_rows", {"table_name": "t"}, None)]


def test_an_unclosed_think_block_has_no_calls() -> None:
    assert parse_completion('I will call {"tool": "list_tables"} next', starts_in_think=True).calls == []
    turn = parse_completion('{"tool": "list_tables"}', starts_in_think=False)
    assert [c.tool for c in turn.calls] == ["list_tables"]


def test_raw_newlines_in_sql_strings_are_accepted() -> None:
    text = '</think>{"tool": "run_query", "args": {"sql": "SELECT a\nFROM t"}}'
    assert _calls(text) == [("run_query", {"sql": "SELECT a\nFROM t"}, None)]


def test_lenient_argument_forms() -> None:
    text = (
        "</think>"
        '{"tool": "join_path", "args": ["Album", "Artist"]}'
        '{"tool": "distinct_values", "args": {"table": "Genre", "column": "Name", "limit": "5"}}'
        '{"tool": "foreign_keys", "args": null}'
        '{"tool": "describe_table", "table_name": "Track"}'
        '{"name": "run_query", "arguments": {"query": "SELECT 2"}}'
    )
    assert _calls(text) == [
        ("join_path", {"table_a": "Album", "table_b": "Artist"}, None),
        ("distinct_values", {"table_name": "Genre", "column_name": "Name", "limit": 5}, None),
        ("foreign_keys", {}, None),
        ("describe_table", {"table_name": "Track"}, None),
        ("run_query", {"sql": "SELECT 2"}, None),
    ]


def test_calls_that_cannot_run_carry_an_error_for_the_model() -> None:
    text = (
        "</think>"
        '{"tool": "drop_table", "args": {}}\n'
        '{"tool": "describe_table", "args": {}}\n'
        '{"tool": "sample_rows", "args": {"table_name": "t", "limit": "many"}}\n'
        '{"tool": "run_query", "args": "SELECT 1"}\n'
        '{"tool": 7}\n'
        '{"tool": "run_query", "args": {"sql": "SELECT 1}}\n'
    )
    errors = [c.error for c in parse_completion(text).calls]
    assert len(errors) == 6
    assert all(errors)
    assert "unknown tool 'drop_table'" in str(errors[0])
    assert "needs the argument 'table_name'" in str(errors[1])
    assert "'limit' must be an integer" in str(errors[2])
    assert "must be a JSON object" in str(errors[3])
    assert "name of a tool" in str(errors[4])
    assert "not valid JSON" in str(errors[5])


def test_objects_that_are_not_calls_are_skipped() -> None:
    assert find_calls('{"id": 1} [1, 2] {"name": "Bob"} {') == []


def test_split_think_variants() -> None:
    assert split_think("a</think>b", starts_in_think=True) == ("a", "b", True)
    assert split_think("<think>a</think>b", starts_in_think=False) == ("a", "b", True)
    assert split_think("<think>a", starts_in_think=False) == ("a", "", False)
    assert split_think("plain", starts_in_think=False) == ("", "plain", True)


def test_final_sql_from_a_submit_call_a_fence_or_bare_text() -> None:
    assert extract_final_sql('{"tool": "submit_sql", "args": {"sql": "SELECT 1;"}}') == "SELECT 1"
    assert extract_final_sql("Final:\n```sql\nSELECT a\nFROM t;\n```\nDone.") == "SELECT a\nFROM t"
    assert (
        extract_final_sql("\nSELECT name FROM t WHERE x = 'a;b'; SELECT 2")
        == "SELECT name FROM t WHERE x = 'a;b'"
    )
    assert extract_final_sql("The answer is SELECT 3\n\nThis counts rows.") == "SELECT 3"
    assert extract_final_sql("WITH c AS (SELECT 1) SELECT * FROM c") == "WITH c AS (SELECT 1) SELECT * FROM c"
    assert extract_final_sql("") is None
    assert extract_final_sql("I could not find it, sorry.") is None
    assert extract_final_sql("```python\nprint(1)\n```") is None


_FRAGMENTS = st.sampled_from(
    [
        "{",
        "}",
        "[",
        "]",
        '"',
        ":",
        ",",
        "\n",
        " ",
        "<think>",
        "</think>",
        "```",
        "```sql\n",
        '"tool"',
        '"args"',
        '"name"',
        '"arguments"',
        "null",
        "5",
        "-1",
        "1e309",
        "true",
        '"sql"',
        '"table_name"',
        '"limit"',
        "SELECT ",
        "WITH ",
        ";",
        "\\",
        "\\u",
        "'",
        *(f'"{name}"' for name in TOOL_NAMES),
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_FRAGMENTS | st.text(max_size=8), max_size=40).map("".join), st.booleans())
def test_parsing_never_raises(text: str, starts_in_think: bool) -> None:
    turn = parse_completion(text, starts_in_think)
    for call in turn.calls:
        assert isinstance(call.tool, str)
        assert isinstance(call.args, dict)
        if call.ok:
            assert call.tool in TOOL_NAMES
    result = extract_final_sql(turn.answer)
    assert result is None or (isinstance(result, str) and result == result.strip() and result)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(TOOL_NAMES),
    st.dictionaries(
        st.sampled_from(["table_name", "table_a", "table_b", "column_name", "limit", "sql", "x"]),
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats()
        | st.text(max_size=5)
        | st.lists(st.integers()),
    ),
)
def test_any_json_arguments_give_a_call_or_an_error(tool: str, args: dict[str, object]) -> None:
    text = "</think>" + json.dumps({"tool": tool, "args": args})
    calls = parse_completion(text).calls
    assert len(calls) == 1
    assert calls[0].tool == tool
