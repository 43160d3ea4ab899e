"""Scripted completions for the replay engine: what the model would write, turn by turn."""

from __future__ import annotations

import json

CHINOOK_ANSWER_SQL = (
    "SELECT ar.Name, COUNT(al.AlbumId) AS albums FROM Artist ar JOIN Album al ON al.ArtistId = ar.ArtistId "
    "GROUP BY ar.ArtistId ORDER BY albums DESC, ar.Name LIMIT 10"
)


def call(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args} if args else {"tool": tool})


def turn(thinking: str, *calls: str) -> str:
    return f"{thinking}\n</think>\n\n" + "\n".join(calls)


def chinook_script(thinking_words: int = 40) -> list[str]:
    """Four turns: list the tables, read two of them, test the query, submit it."""
    filler = " ".join(["The question asks which artists have the most albums."] * max(1, thinking_words // 9))
    return [
        turn(f"I need to see the tables first. {filler}", call("list_tables")),
        turn(
            f"Artist and Album look relevant. {filler}",
            call("describe_table", table_name="Artist"),
            call("join_path", table_a="Artist", table_b="Album"),
        ),
        turn(f"Let me test the query. {filler}", call("run_query", sql=CHINOOK_ANSWER_SQL)),
        turn(f"The query works; submitting. {filler}", call("submit_sql", sql=CHINOOK_ANSWER_SQL)),
    ]
