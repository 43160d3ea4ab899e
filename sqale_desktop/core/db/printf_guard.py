"""A ``printf()``/``format()`` that refuses giant widths, so one call cannot outrun the time limit.

SQLite's own printf runs a whole call in C without consulting the progress handler, and in the
SQLite builds Python ships (3.40 here) ``printf('%.*c', 2147483647, 'x')`` repeats a character
two billion times even after the output has hit the length limit: about ten seconds per call that
neither the time limit nor Stop can interrupt.  A length limit does not help (the loop keeps
going after the limit), so the function itself is replaced on every read-only connection: the
replacement adds up the widths and precisions a call asks for, refuses the call above
``PRINTF_WIDTH_BUDGET`` characters, checks the statement's deadline, and otherwise hands the
same arguments to the built-in printf of a private in-memory connection, so results stay exactly
SQLite's.

``instr()`` is replaced the same way: SQLite compares the needle at every position of the
haystack (``instr(zeroblob(4e5)||'x', zeroblob(2e5)||'y')`` is three seconds in one call, and it
grows with the square of the lengths); the replacement searches with Python's ``bytes.find``,
which is linear for long needles, and counts characters the way SQLite does.

Why ctypes: the replacement must also work inside the user's views (``sample_rows`` on a view
that holds the bomb), and with ``trusted_schema = 0`` (kept on purpose) SQLite only lets views
call application functions registered as ``SQLITE_INNOCUOUS``, a flag Python's
``create_function`` cannot set.  So the function is registered through ``sqlite3_create_function_v2``
on the connection's own handle.  Where that is not possible (an interpreter whose connection
layout or library we cannot verify), ``install`` returns False and the built-in stays: every other
limit still holds, and the caller knows.
"""

from __future__ import annotations

import ctypes
import logging
import re
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# Characters of padding/repetition one printf call may ask for: far more than any report needs
# (a bar chart of '*', a padded column), little enough that one call costs well under 1 ms.
PRINTF_WIDTH_BUDGET = 100_000

_SQLITE_UTF8 = 1
_SQLITE_DETERMINISTIC = 0x800
_SQLITE_INNOCUOUS = 0x200000
_SQLITE_INTERRUPT = 9
_SQLITE_TRANSIENT = ctypes.c_void_p(-1)
_INTEGER, _FLOAT, _TEXT, _BLOB, _NULL = 1, 2, 3, 4, 5
# Every byte that starts a UTF-8 character (not 0x80-0xBF): deleting them leaves the continuations.
_CHARACTER_STARTS = bytes(b for b in range(256) if not 0x80 <= b <= 0xBF)

# One conversion: flags, width (digits or *), precision (. digits or .*), length, the type letter.
_SPEC = re.compile(r"%[-+ #0!,]*(\*|\d+)?,?(?:\.(\*|\d*))?l{0,2}(.)", re.DOTALL)
# The number a text argument reads as; a float-like prefix counts in full, which can only
# over-estimate what SQLite reads (it may stop at the '.').
_LEADING_NUMBER = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
_INT_MASK = 0x7FFFFFFF
# More digits than this in a width is absurd; such a width counts as over the budget.
_MAX_WIDTH_DIGITS = 12

_XFUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))


def _as_int(value: object) -> int:
    """The integer SQLite's printf would read for a ``*`` argument (a leading number, else 0)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value == value and abs(value) < 2**63 else 0
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if isinstance(value, str):
        match = _LEADING_NUMBER.match(value[:64])
        return _as_int(float(match.group(1))) if match else 0
    return 0


def requested_width(args: list[object]) -> int:
    """The padding and repetition characters a printf call asks for, summed over its conversions."""
    if not args or not isinstance(args[0], str | bytes):
        return 0
    fmt = args[0].decode("utf-8", "replace") if isinstance(args[0], bytes) else args[0]
    rest = iter(args[1:])
    total = 0
    for match in _SPEC.finditer(fmt):
        width, precision, kind = match.groups()
        for part in (width, precision):
            if part == "*":
                total += min(abs(_as_int(next(rest, 0))), _INT_MASK)
            elif part and len(part) > _MAX_WIDTH_DIGITS:
                total += _INT_MASK
            elif part:
                total += int(part) & _INT_MASK
        if kind not in "%n":
            next(rest, None)  # the value converted
    return total


class _Library:
    """The C library behind Python's sqlite3 module, with the few functions used here."""

    def __init__(self) -> None:
        import _sqlite3

        lib = ctypes.CDLL(_sqlite3.__file__)
        self.create = lib.sqlite3_create_function_v2
        self.create.restype = ctypes.c_int
        self.create.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_void_p,
            _XFUNC,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        self.db_filename = lib.sqlite3_db_filename
        self.db_filename.restype = ctypes.c_char_p
        self.db_filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.value_type = lib.sqlite3_value_type
        self.value_type.argtypes = [ctypes.c_void_p]
        self.value_int64 = lib.sqlite3_value_int64
        self.value_int64.restype = ctypes.c_int64
        self.value_int64.argtypes = [ctypes.c_void_p]
        self.value_double = lib.sqlite3_value_double
        self.value_double.restype = ctypes.c_double
        self.value_double.argtypes = [ctypes.c_void_p]
        self.value_blob = lib.sqlite3_value_blob
        self.value_blob.restype = ctypes.c_void_p
        self.value_blob.argtypes = [ctypes.c_void_p]
        self.value_text = lib.sqlite3_value_text
        self.value_text.restype = ctypes.c_void_p
        self.value_text.argtypes = [ctypes.c_void_p]
        self.value_bytes = lib.sqlite3_value_bytes
        self.value_bytes.argtypes = [ctypes.c_void_p]
        self.result_text = lib.sqlite3_result_text
        self.result_text.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
        self.result_int64 = lib.sqlite3_result_int64
        self.result_int64.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        self.result_null = lib.sqlite3_result_null
        self.result_null.argtypes = [ctypes.c_void_p]
        self.result_error = lib.sqlite3_result_error
        self.result_error.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        self.result_error_code = lib.sqlite3_result_error_code
        self.result_error_code.argtypes = [ctypes.c_void_p, ctypes.c_int]

    def raw(self, handle: int, *, as_text: bool) -> bytes:
        """The value's bytes: as SQLite's text (numbers converted its way) or as a blob."""
        pointer = self.value_text(handle) if as_text else self.value_blob(handle)
        size = self.value_bytes(handle)
        return ctypes.string_at(pointer, size) if pointer else b""

    def value(self, handle: int) -> object:
        kind = self.value_type(handle)
        if kind == _INTEGER:
            return int(self.value_int64(handle))
        if kind == _FLOAT:
            return float(self.value_double(handle))
        if kind == _TEXT:
            pointer = self.value_text(handle)
            size = self.value_bytes(handle)  # after value_text, as SQLite's conversion rules ask
            return ctypes.string_at(pointer, size).decode("utf-8", "replace") if pointer else ""
        if kind == _BLOB:
            pointer = self.value_blob(handle)
            size = self.value_bytes(handle)
            return ctypes.string_at(pointer, size) if pointer else b""
        return None


_library: _Library | None = None
_library_failed = False
_library_lock = threading.Lock()


def _load_library() -> _Library | None:
    global _library, _library_failed
    with _library_lock:
        if _library is None and not _library_failed:
            try:
                _library = _Library()
            except (OSError, AttributeError, ImportError) as exc:
                log.warning("printf guard unavailable (%s): the built-in printf stays", exc)
                _library_failed = True
        return _library


def _handle(conn: sqlite3.Connection, lib: _Library, filename: str) -> int | None:
    """The ``sqlite3*`` of ``conn``, verified by asking SQLite for the file it has open.

    CPython keeps the handle as the first field after the object header in every version that has
    ``sqlite3.Connection``; the check against ``sqlite3_db_filename`` makes sure of it here.
    """
    pointer = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
    if not pointer:
        return None
    opened = lib.db_filename(pointer, b"main")
    if opened is None or opened.decode("utf-8", "replace") != filename:
        return None
    return int(pointer)


class PrintfGuard:
    """The replacement ``printf``/``format`` of one connection; keep it alive as long as the connection.

    ``should_stop`` is the connection's progress check (True to stop the statement), consulted
    once per call so that a statement made of many calls still ends at its deadline.
    """

    def __init__(self, lib: _Library, should_stop: Callable[[], bool], max_length: int) -> None:
        self._lib = lib
        self._should_stop = should_stop
        self._helper = sqlite3.connect(":memory:", check_same_thread=False)
        self._helper.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_length)
        self._statements: dict[int, str] = {}
        self.callback = _XFUNC(self._call)
        self.instr_callback = _XFUNC(self._instr)

    def close(self) -> None:
        self._helper.close()

    def _call(self, context: int, argc: int, argv: Any) -> None:
        lib = self._lib
        try:
            if self._should_stop():
                lib.result_error_code(context, _SQLITE_INTERRUPT)
                return
            args = [lib.value(argv[i]) for i in range(argc)]
            asked = requested_width(args)
            if asked > PRINTF_WIDTH_BUDGET:
                message = (
                    f"printf() asks for {asked:,} characters of width or precision, "
                    f"more than the {PRINTF_WIDTH_BUDGET:,} allowed"
                )
                lib.result_error(context, message.encode(), -1)
                return
            sql = self._statements.get(argc)
            if sql is None:
                sql = self._statements[argc] = f"SELECT printf({', '.join('?' * argc)})"
            value = self._helper.execute(sql, args).fetchone()[0]
            if value is None:
                lib.result_null(context)
            else:
                data = str(value).encode("utf-8", "surrogatepass")
                lib.result_text(context, data, len(data), _SQLITE_TRANSIENT)
        except Exception as exc:  # a ctypes callback must not raise; the statement gets the error
            lib.result_error(context, f"printf() failed: {exc}".encode("utf-8", "replace"), -1)

    def _instr(self, context: int, argc: int, argv: Any) -> None:
        """SQLite's ``instr(X, Y)``, searched in linear time (see the module docstring)."""
        lib = self._lib
        try:
            if self._should_stop():
                lib.result_error_code(context, _SQLITE_INTERRUPT)
                return
            kinds = (lib.value_type(argv[0]), lib.value_type(argv[1]))
            if _NULL in kinds:
                lib.result_null(context)
                return
            blobs = kinds == (_BLOB, _BLOB)
            haystack = lib.raw(argv[0], as_text=not blobs)
            needle = lib.raw(argv[1], as_text=not blobs)
            found = haystack.find(needle)
            if found < 0:
                position = 0
            elif blobs:
                position = found + 1
            else:  # characters before the match: bytes that start a UTF-8 character
                position = len(haystack[:found].translate(None, _CHARACTER_STARTS))
                position = found - position + 1
            lib.result_int64(context, position)
        except Exception as exc:  # a ctypes callback must not raise; the statement gets the error
            lib.result_error(context, f"instr() failed: {exc}".encode("utf-8", "replace"), -1)


def install(
    conn: sqlite3.Connection, filename: str, should_stop: Callable[[], bool], max_length: int
) -> PrintfGuard | None:
    """Replace ``printf``, ``format`` and ``instr`` on ``conn``; None (built-ins kept) where not possible.

    ``filename`` is the path SQLite reports for the connection's main database (the check that
    the handle found is the right one).
    """
    lib = _load_library()
    if lib is None:
        return None
    handle = _handle(conn, lib, filename)
    if handle is None:
        log.warning("printf guard unavailable: cannot verify the connection handle")
        return None
    guard = PrintfGuard(lib, should_stop, max_length)
    flags = _SQLITE_UTF8 | _SQLITE_DETERMINISTIC | _SQLITE_INNOCUOUS
    replaced = (
        (b"printf", -1, guard.callback),
        (b"format", -1, guard.callback),
        (b"instr", 2, guard.instr_callback),
    )
    for name, arity, callback in replaced:
        code = lib.create(handle, name, arity, flags, None, callback, None, None, None)
        if code != 0:
            guard.close()
            log.warning("printf guard unavailable: sqlite3_create_function_v2 returned %d", code)
            return None
    return guard
