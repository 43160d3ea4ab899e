"""The episode loop's own costs and how fast a Stop takes effect, without a model.

Prints human-readable figures, then ONE JSON object on the last line:
- ``parse_us``: microseconds to parse one tool-turn completion (think block and three calls);
- ``loop_ms_per_episode``: a full 7-turn replayed episode on Chinook (17 tool calls, the final
  answer rerun), i.e. everything the loop adds around the model;
- ``cancel_ms``: time from a Stop to the episode's end, p50/max, for a completion streaming from
  the replay engine (one chunk every 5 ms), an OpenAI-compatible server that stalls mid-stream,
  and a runaway query stopped through ``EpisodeControl.cancel()`` or by setting only the flag
  (the loop's watcher interrupts the query) (target <= 200 ms each).

    .venv/bin/python benchmarks/agent.py [--quick] [--db PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqale_desktop.core.agent.events import EpisodeEnded, Event, TextDelta, ToolCalled
from sqale_desktop.core.agent.loop import EpisodeControl, run_episode
from sqale_desktop.core.agent.parser import parse_completion
from sqale_desktop.core.db import ReadOnlyDatabase, open_readonly
from sqale_desktop.core.engines.base import Engine
from sqale_desktop.core.engines.openai_http import OpenAIEngine
from sqale_desktop.core.engines.replay import ReplayEngine
from sqale_desktop.core.tools import ToolBox

DEFAULT_DB = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "sample" / "chinook.sqlite"
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"


def _call(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


TURN = (
    "I should look at the album and artist tables, then count albums per artist and check the "
    "top one against the raw rows before I submit anything.\n</think>\n\n"
    + _call("describe_table", table_name="Album")
    + "\n"
    + _call("join_path", table_a="Album", table_b="Artist")
    + "\n"
    + _call("run_query", sql="SELECT ArtistId, COUNT(*) FROM Album GROUP BY ArtistId ORDER BY 2 DESC LIMIT 3")
)
EPISODE = [TURN] * 5 + [
    "Check.\n</think>\n" + _call("run_query", sql="SELECT COUNT(*) FROM Track") + _call("list_tables"),
    "Done.\n</think>\n```sql\nSELECT Name FROM Artist WHERE ArtistId = 90\n```",
]


def bench_parse(repeats: int) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        parse_completion(TURN)
    return (time.perf_counter() - started) / repeats * 1e6


def _run(db: ReadOnlyDatabase, engine: Engine, cancel: threading.Event | None = None) -> list[Event]:
    return list(run_episode("Which artist has the most albums?", db, ToolBox(db), engine, cancel=cancel))


def bench_loop(db: ReadOnlyDatabase, repeats: int) -> float:
    engine = ReplayEngine(EPISODE, chunk_chars=16)
    events = _run(db, engine)
    last = events[-1]
    assert isinstance(last, EpisodeEnded) and last.episode.ended_by == "final_turn", last
    started = time.perf_counter()
    for _ in range(repeats):
        _run(db, engine)
    return (time.perf_counter() - started) / repeats * 1000


def _cancel_after(
    events: Iterator[Event], trigger: Callable[[Event], bool], stop: Callable[[], None]
) -> tuple[float, EpisodeEnded]:
    """Consume an episode; when ``trigger`` fires, Stop from another thread 20 ms later."""
    stopped_at: list[float] = []

    def stop_now() -> None:
        stopped_at.append(time.perf_counter())
        stop()

    timer: threading.Timer | None = None
    for event in events:
        if timer is None and trigger(event):
            timer = threading.Timer(0.02, stop_now)
            timer.start()
        if isinstance(event, EpisodeEnded):
            assert stopped_at, "the episode ended before the Stop"
            return (time.perf_counter() - stopped_at[0]) * 1000, event
    raise AssertionError("no EpisodeEnded")


def bench_cancel_stream(db: ReadOnlyDatabase) -> float:
    cancel = threading.Event()
    engine = ReplayEngine(["x " * 5000], chunk_chars=2, delay=0.005)
    events = run_episode("q", db, ToolBox(db), engine, cancel=cancel)
    ms, ended = _cancel_after(events, lambda e: isinstance(e, TextDelta), cancel.set)
    assert ended.episode.ended_by == "cancelled"
    return ms


def bench_cancel_query(db: ReadOnlyDatabase, flag_only: bool) -> float:
    """A Stop during a runaway query: ``EpisodeControl.cancel()``, or only setting the flag."""
    control = EpisodeControl()
    engine = ReplayEngine(["</think>" + _call("run_query", sql=ENDLESS)])
    events = run_episode("q", db, ToolBox(db), engine, cancel=control.event)
    stop = control.event.set if flag_only else control.cancel
    ms, ended = _cancel_after(events, lambda e: isinstance(e, ToolCalled), stop)
    assert ended.episode.ended_by == "cancelled"
    return ms


class _StallingServer:
    """Streams one chunk of a completion, then stalls until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        release = self.release

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                event = {"choices": [{"index": 0, "text": "thinking", "finish_reason": None}]}
                try:
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                    self.wfile.flush()
                except OSError:
                    return
                release.wait(30)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def bench_cancel_http(db: ReadOnlyDatabase, server: _StallingServer) -> float:
    cancel = threading.Event()
    events = run_episode("q", db, ToolBox(db), OpenAIEngine(server.url, model="m"), cancel=cancel)
    ms, ended = _cancel_after(events, lambda e: isinstance(e, TextDelta), cancel.set)
    assert ended.episode.ended_by == "cancelled"
    return ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (well under a minute)")
    parser.add_argument("--db", type=Path, default=DEFAULT_DB, help="database for the episodes (Chinook)")
    args = parser.parse_args()
    if not args.db.exists():
        print(f"no database at {args.db}", file=sys.stderr)
        return 2
    parse_repeats, loop_repeats, cancel_repeats = (2000, 20, 5) if args.quick else (20000, 100, 20)
    db = open_readonly(args.db, time_limit_s=60)
    server = _StallingServer()
    try:
        parse_us = bench_parse(parse_repeats)
        print(f"parse one tool turn: {parse_us:.1f} µs")
        loop_ms = bench_loop(db, loop_repeats)
        print(f"7-turn replayed episode, loop and tools only: {loop_ms:.1f} ms")
        cancels: dict[str, list[float]] = {"stream": [], "http": [], "query": [], "query_flag_only": []}
        for _ in range(cancel_repeats):
            cancels["stream"].append(bench_cancel_stream(db))
            cancels["http"].append(bench_cancel_http(db, server))
            cancels["query"].append(bench_cancel_query(db, flag_only=False))
            cancels["query_flag_only"].append(bench_cancel_query(db, flag_only=True))
    finally:
        server.close()
        db.close()
    cancel_ms = {
        kind: {"p50": round(statistics.median(values), 1), "max": round(max(values), 1)}
        for kind, values in cancels.items()
    }
    for kind, figures in cancel_ms.items():
        print(f"stop -> episode ended ({kind}): p50 {figures['p50']} ms, max {figures['max']} ms")
    print(
        json.dumps(
            {
                "parse_us": round(parse_us, 1),
                "loop_ms_per_episode": round(loop_ms, 2),
                "cancel_ms": cancel_ms,
                "cancel_target_ms": 200,
                "quick": args.quick,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
