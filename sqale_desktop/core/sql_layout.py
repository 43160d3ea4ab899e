"""The editor's Format: one clause a line, keywords upper case, and the same query afterwards.

``sqlparse.format(keyword_case="upper", reindent=True)`` changed what a query returns: its lexer
calls ``first``, ``last``, ``year`` and ``level`` keywords, so ``AS first`` became ``AS FIRST`` and
the result's header changed with it; and SQLite names an unaliased result column by the text of
its expression, so ``count( * )`` or a ``CASE`` re-spaced by the reindenter changed headers too.

So this formatter works on sqlparse's lexer tokens (never its grouping, which refuses 10,000+
tokens) and changes only two things:

* **case**, of words that are keywords wherever they stand: SQLite's reserved words (those its
  grammar never accepts as a bare name), and the few non-reserved ones (``BY``, ``DESC``, ``END``,
  ``LIKE``, ``OFFSET``…) only in the one position where they cannot be a name.  Names, aliases,
  function names, literals and quoted identifiers keep their spelling;
* **white space between tokens**, in a query: a line break before each clause and each further
  result column, ``AND``/``OR`` of a ``WHERE`` on their own lines.

A result column without an alias is copied exactly as written (case and spaces): its text is its
header.  Statements that are not queries (the schema tree's CREATE statements) keep their layout,
comments included, and only get their keywords upper-cased.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlparse
from sqlparse import tokens as T


def _words(text: str) -> list[str]:
    return text.split()


# SQLite's keywords that its grammar never takes as an unquoted name (every keyword of
# https://sqlite.org/lang_keywords.html less parse.y's ``%fallback ID`` list, the join words and
# WINDOW/OVER/FILTER, which the tokenizer makes names where they are not followed by their clause).
RESERVED = frozenset(
    _words(
        "ADD ALL ALTER AND AS AUTOINCREMENT BETWEEN CASE CHECK COLLATE COMMIT CONSTRAINT CREATE DEFAULT "
        "DEFERRABLE DELETE DISTINCT DROP ELSE ESCAPE EXCEPT EXISTS FOREIGN FROM GROUP HAVING IN INDEX "
        "INDEXED INSERT INTERSECT INTO IS ISNULL JOIN LIMIT NOT NOTHING NOTNULL NULL ON OR ORDER "
        "PRIMARY REFERENCES RETURNING SELECT SET TABLE THEN TO TRANSACTION UNION UNIQUE UPDATE USING "
        "VALUES WHEN WHERE"
    )
)
_JOIN_WORDS = frozenset(_words("CROSS FULL INNER LEFT NATURAL OUTER RIGHT"))
_CLAUSES = frozenset(_words("SELECT FROM WHERE GROUP HAVING ORDER LIMIT UNION INTERSECT EXCEPT VALUES"))
_LIST_ENDS = frozenset(_words("FROM WHERE GROUP HAVING ORDER LIMIT UNION INTERSECT EXCEPT"))
_QUERY_STARTS = frozenset({"SELECT", "WITH", "VALUES"})
_STATEMENT_WORDS = frozenset(
    _words("ANALYZE ATTACH BEGIN COMMIT DETACH END EXPLAIN PRAGMA REINDEX RELEASE ROLLBACK SAVEPOINT VACUUM")
)
_SELECT_INDENT = len("SELECT ")
_CONDITION_INDENT = 2


@dataclass
class _Token:
    kind: object
    text: str
    space: str  # the white space written before it
    word: str = ""  # upper-cased, white space folded to one space; "" for a non-word
    depth: int = 0  # parentheses open before it
    verbatim: bool = False  # part of an unaliased result column: copied as written
    keep_case: bool = False  # an alias


@dataclass
class _Level:
    """A query or a subquery being laid out: where its lines start, which clause it is in."""

    depth: int
    indent: int
    clause: str = ""
    between: bool = False
    first: bool = True


@dataclass
class _Statement:
    tokens: list[_Token] = field(default_factory=list)


def format_sql(sql: str) -> str:
    """``sql`` laid out and its keywords upper-cased; what it returns is unchanged (see above).

    sqlparse's lexer reads a few things otherwise than SQLite (``\\'`` ends no string in SQLite),
    so the result is checked against SQLite's own rules: where a literal, quoted name or comment
    would differ, the text is returned as it was written."""
    statements = _statements(sql)
    parts = [_layout(s.tokens) for s in statements if s.tokens]
    formatted = "\n\n".join(p for p in parts if p).strip()
    if _quoted(formatted) != _quoted(sql):
        return sql.strip()
    return formatted


_CLOSERS = {"'": "'", '"': '"', "`": "`", "[": "]"}


def _quoted(sql: str) -> list[str]:
    """The literals, quoted names and comments of ``sql`` as SQLite's tokenizer cuts them."""
    found: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in _CLOSERS:
            close = _CLOSERS[c]
            j = i + 1
            while j < n:
                if sql[j] == close:
                    if close != "]" and sql[j + 1 : j + 2] == close:
                        j += 2
                        continue
                    break
                j += 1
            found.append(sql[i : j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            found.append(sql[i:j].rstrip())
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            found.append(sql[i:j])
            i = j
        else:
            i += 1
    return found


def _is_word(kind: object, text: str) -> bool:
    return (
        bool(text)
        and (text[0].isalpha() or text[0] == "_")
        and (kind in T.Keyword or kind in T.Name or kind in T.Operator)
    )


def _statements(sql: str) -> list[_Statement]:
    """The text's tokens, each with the white space before it and its depth, cut at ``;``."""
    statements = [_Statement()]
    space = ""
    depth = 0
    for kind, text in sqlparse.lexer.tokenize(sql):  # type: ignore[no-untyped-call]
        if kind in T.Whitespace or kind in T.Newline or (text.isspace() and kind not in T.Comment):
            space += text
            continue
        word = " ".join(text.upper().split()) if _is_word(kind, text) else ""
        if text == ")":
            depth = max(0, depth - 1)
        token = _Token(kind, text, space, word, depth)
        space = ""
        statements[-1].tokens.append(token)
        if text == "(":
            depth += 1
        if text == ";" and depth == 0:
            statements.append(_Statement())
    for statement in statements:
        _mark_result_columns(statement.tokens)
    return statements


def _code(tokens: list[_Token]) -> list[int]:
    """Positions of the tokens that are not comments."""
    return [i for i, t in enumerate(tokens) if t.kind not in T.Comment]


def _mark_result_columns(tokens: list[_Token]) -> None:
    """Mark every SELECT's unaliased result columns verbatim and its aliases case-kept."""
    code = _code(tokens)
    for n, i in enumerate(code):
        if tokens[i].word != "SELECT":
            continue
        depth = tokens[i].depth
        start = n + 1
        if start < len(code) and tokens[code[start]].word in ("DISTINCT", "ALL"):
            start += 1
        items: list[list[int]] = [[]]
        previous = ""
        for j in code[start:]:
            t = tokens[j]
            ends = t.text == ";" or (t.word.split(" ")[0] in _LIST_ENDS and previous != ".")
            if t.depth < depth or (t.depth == depth and ends):
                break
            previous = t.text
            if t.depth == depth and t.text == ",":
                items.append([])
                continue
            items[-1].append(j)
        for item in items:
            _mark_item(tokens, item)


def _mark_item(tokens: list[_Token], item: list[int]) -> None:
    if not item:
        return
    last = tokens[item[-1]]
    before = tokens[item[-2]] if len(item) > 1 else None
    named = last.kind in T.Literal.String.Symbol or last.kind in T.Name  # never a keyword
    if before is not None and last.word not in RESERVED:
        as_alias = before.word == "AS" and (named or last.word != "")
        bare_alias = (
            named
            and bool(last.space)
            and (before.text == ")" or before.kind in T.Name or before.kind in T.Literal)
        )
        if as_alias or bare_alias:
            last.keep_case = True  # the header; the expression before it may be laid out
            return
    first = item[0]
    inside = tokens[first].verbatim  # within an outer result column already copied as written
    for j in range(first, item[-1] + 1):
        tokens[j].verbatim = True
    tokens[first].verbatim = inside  # else its own leading space is the layout's
    tokens[first].keep_case = True


def _upper(tokens: list[_Token], i: int, position: int, code: list[int], state: dict[str, int]) -> bool:
    """Whether the word at ``i`` (``position`` among the code tokens) is a keyword where it stands.

    ``state`` counts the CASEs still open and says whether a LIMIT clause is being read."""
    t = tokens[i]
    if t.word == "CASE":
        state["case"] += 1
    elif t.word == "END" and state["case"] > 0:
        state["case"] -= 1
        return not t.keep_case
    if not t.word or t.keep_case:
        return False
    prev = tokens[code[position - 1]] if position > 0 else None
    after = tokens[code[position + 1]] if 0 <= position < len(code) - 1 else None
    prev_word = prev.word if prev is not None else ""
    next_text = after.text if after is not None else ""
    next_word = after.word if after is not None else ""
    word = t.word
    if " " in word:  # sqlparse's phrases: GROUP BY, LEFT JOIN, NOT NULL, NULLS FIRST, UNION ALL
        return word.split(" ")[0] in RESERVED | _JOIN_WORDS | {"NULLS"}
    if prev is not None and prev.text == ".":
        return False
    if word in RESERVED:
        return True
    if prev is None:
        return word in _STATEMENT_WORDS or word in _QUERY_STARTS
    operand_before = prev.text == ")" or prev.kind in T.Name or prev.kind in T.Literal or prev_word == "NOT"
    if word in _JOIN_WORDS:
        return next_word.endswith("JOIN") or next_word in _JOIN_WORDS
    if word == "BY":
        return prev_word in ("GROUP", "ORDER", "PARTITION")
    if word == "PARTITION":
        return next_word == "BY"
    if word in ("ASC", "DESC"):
        ends = next_text in ("", ",", ")", ";") or next_word in RESERVED or next_word.startswith("NULLS")
        return operand_before and ends and prev_word != "AS"
    if word in ("LIKE", "GLOB", "REGEXP", "MATCH"):
        return operand_before
    if word in ("CAST", "RAISE"):
        return next_text == "("
    if word in ("OVER", "FILTER"):
        return prev.text == ")" and (next_text == "(" or word == "OVER")
    if word == "WITH":
        return prev.text == "("
    if word == "RECURSIVE":
        return prev_word == "WITH"
    if word == "OFFSET":
        return state["limit"] > 0
    if word in ("FIRST", "LAST"):
        return prev_word == "NULLS"
    if word == "NULLS":
        return next_word in ("FIRST", "LAST")
    if word == "KEY":
        return prev_word in ("PRIMARY", "FOREIGN")
    if word == "IF":
        return next_word in ("NOT", "EXISTS")
    if word in ("QUERY", "PLAN"):
        return prev_word in ("EXPLAIN", "QUERY")
    return False


def _layout(tokens: list[_Token]) -> str:
    code = _code(tokens)
    if not code:
        return "".join(t.space + t.text for t in tokens).strip()
    query = tokens[code[0]].word in _QUERY_STARTS
    state = {"case": 0, "limit": 0}
    levels = [_Level(depth=0, indent=0)]
    out: list[str] = []
    column = 0
    previous: _Token | None = None
    positions = {i: n for n, i in enumerate(code)}
    for i, t in enumerate(tokens):
        upper = _upper(tokens, i, positions.get(i, -1), code, state)
        cased = t.text.upper() if upper else t.text
        if " " in t.word and cased != t.text:
            cased = t.word
        if t.word == "LIMIT":
            state["limit"] = 1
        elif t.word.split(" ")[0] in _CLAUSES or t.text in (")", ";"):
            state["limit"] = 0
        if not query or t.verbatim:
            space = t.space if out else ""
            if t.verbatim:
                cased = t.text
        else:
            space = _space(t, previous, levels, out)
        if t.text == ")" and len(levels) > 1 and t.depth < levels[-1].depth:
            levels.pop()
        piece = space + cased
        out.append(piece)
        column = len(piece) - piece.rfind("\n") - 1 if "\n" in piece else column + len(piece)
        position = positions.get(i, -1)
        if t.text == "(" and 0 <= position < len(code) - 1:
            after = tokens[code[position + 1]]
            if after.word in _QUERY_STARTS:
                levels.append(_Level(depth=t.depth + 1, indent=column))
        if t.kind not in T.Comment:
            previous = t
    return "".join(out).strip()


def _space(t: _Token, previous: _Token | None, levels: list[_Level], out: list[str]) -> str:
    """The white space to write before ``t`` in a query: a line break and indent where a clause or
    a result column starts, else one space where there was space, else none."""
    level = levels[-1]
    after_line_comment = bool(out) and out[-1].endswith("\n")
    plain = " " if t.space and out else ""
    if after_line_comment:
        plain = " " * level.indent  # a -- comment's own line break ends its line

    def line(indent: int) -> str:
        return " " * indent if after_line_comment else "\n" + " " * indent

    if t.kind in T.Comment:
        return plain
    if t.depth != level.depth:
        return plain
    head = t.word.split(" ")[0]
    # A lone LEFT is a name (or a join sqlparse split); LEFT JOIN is one token.
    is_clause = head in _CLAUSES or t.word.endswith(" JOIN") or t.word == "JOIN"
    if is_clause and (previous is None or previous.text != "."):
        first = level.first
        level.first = False
        level.clause = head
        level.between = False
        if previous is None or (first and previous.text == "("):
            return plain
        return line(level.indent)
    if previous is None:
        return plain
    if t.word == "BETWEEN":
        level.between = True
    if t.word in ("AND", "OR") and level.clause in ("WHERE", "HAVING"):
        if t.word == "AND" and level.between:
            level.between = False
            return plain
        return line(level.indent + _CONDITION_INDENT)
    if previous.text == "," and previous.depth == level.depth and level.clause == "SELECT":
        return line(level.indent + _SELECT_INDENT)
    level.first = False
    return plain
