"""Latency of the eight tools on a 2-million-row table, and how fast runaway queries stop.

Prints human-readable figures, then ONE JSON object on the last line:
- ``tools``: p50/p95 milliseconds of every tool call (one ToolBox, as in an episode; the first,
  cold ``list_tables`` also reads the schema and is reported on its own);
- ``overshoot_ms``: how long past its time limit each kind of runaway query ran before it stopped
  (target <= 50 ms);
- ``interrupt_ms``: time from ``interrupt()`` on another thread to the query's end (target <= 100 ms);
- ``large_schema``: a generated schema of ``--tables`` (10,000) tables chained by foreign keys:
  the first call (which reads the schema once for the database), then p50/p95 of ``list_tables``,
  ``join_path`` (first to last table: the longest path there is) and ``foreign_keys`` (all of
  them) from fresh tool boxes, as each episode makes (target <= 500 ms each).

The database is generated into a temporary file with a recursive CTE (it is the benchmark's own
file, not a user's database), then opened read-only like any other.

    .venv/bin/python benchmarks/tools.py [--quick] [--rows N] [--tables N]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqale_desktop.core.db import DatabaseError, QueryInterrupted, QueryTimeout, open_readonly
from sqale_desktop.core.tools import ToolBox, ToolOutput

CUSTOMERS = 10_000


def generate(path: Path, rows: int) -> float:
    """Build the benchmark database; returns the seconds it took."""
    started = time.perf_counter()
    conn = sqlite3.connect(path)
    conn.executescript(
        f"""
        PRAGMA journal_mode = OFF;
        PRAGMA synchronous = OFF;
        CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
        CREATE TABLE orders (
            id INTEGER PRIMARY KEY,
            customer_id INTEGER NOT NULL REFERENCES customers (id),
            amount REAL NOT NULL,
            status TEXT NOT NULL,
            note TEXT
        );
        CREATE TABLE order_items (
            id INTEGER PRIMARY KEY,
            order_id INTEGER NOT NULL REFERENCES orders (id),
            sku TEXT NOT NULL
        );
        INSERT INTO customers
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {CUSTOMERS})
            SELECT x, 'customer ' || x, char(65 + x % 26) || char(65 + x % 7) FROM c;
        INSERT INTO orders
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {rows})
            SELECT x, 1 + x % {CUSTOMERS}, (x * 7919 % 100000) / 100.0,
                   CASE x % 4 WHEN 0 THEN 'new' WHEN 1 THEN 'paid' WHEN 2 THEN 'shipped' ELSE 'returned' END,
                   CASE WHEN x % 10 = 0 THEN NULL ELSE 'note number ' || x END
            FROM c;
        INSERT INTO order_items
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000)
            SELECT x, 1 + x * 13 % {rows}, 'SKU-' || (x % 500) FROM c;
        """
    )
    conn.commit()
    conn.close()
    return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def time_calls(call: Callable[[], ToolOutput], repeats: int) -> dict[str, float]:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        out = call()
        samples.append((time.perf_counter() - started) * 1000)
        if not out.ok:
            raise RuntimeError(f"benchmark call failed: {out.text}")
    return {"p50_ms": round(percentile(samples, 0.5), 2), "p95_ms": round(percentile(samples, 0.95), 2)}


RUNAWAYS = {
    "recursive_cte": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    "cross_join_scan": "SELECT count(*) FROM orders a, orders b WHERE a.amount + b.amount < 0",
    "sort_2m_rows": "SELECT * FROM orders ORDER BY note DESC, amount",
    "group_by_text": "SELECT note, count(*) FROM orders GROUP BY note ORDER BY 2 DESC LIMIT 1",
}


def overshoot(path: Path, limit_s: float, repeats: int) -> dict[str, dict[str, float]]:
    """Milliseconds each runaway kept running after its deadline."""
    results: dict[str, dict[str, float]] = {}
    with open_readonly(path, time_limit_s=limit_s) as db:
        for name, sql in RUNAWAYS.items():
            samples = []
            for _ in range(repeats):
                started = time.perf_counter()
                try:
                    db.execute(sql)
                except QueryTimeout:
                    samples.append((time.perf_counter() - started - limit_s) * 1000)
                else:
                    raise RuntimeError(f"{name} finished inside {limit_s} s: not a runaway on this machine")
            results[name] = {
                "median_ms": round(statistics.median(samples), 2),
                "max_ms": round(max(samples), 2),
            }
    return results


def interrupt_latency(path: Path, repeats: int) -> dict[str, float]:
    """Milliseconds from interrupt() to the running query's end, for queries on another thread."""
    samples = []
    with open_readonly(path, time_limit_s=120) as db:
        for i in range(repeats):
            sql = list(RUNAWAYS.values())[i % len(RUNAWAYS)]
            ended: list[float] = []
            errors: list[BaseException] = []

            def run(
                query: str = sql, ended: list[float] = ended, errors: list[BaseException] = errors
            ) -> None:
                try:
                    db.execute(query)
                except DatabaseError as exc:
                    errors.append(exc)
                ended.append(time.perf_counter())

            thread = threading.Thread(target=run)
            thread.start()
            while not db.busy:
                time.sleep(0.001)
            time.sleep(0.2)  # let it get deep into the work
            asked = time.perf_counter()
            db.interrupt()
            thread.join()
            if not errors or not isinstance(errors[0], QueryInterrupted):
                raise RuntimeError(f"query was not interrupted: {errors}")
            samples.append((ended[0] - asked) * 1000)
    return {
        "median_ms": round(statistics.median(samples), 2),
        "max_ms": round(max(samples), 2),
        "samples": len(samples),
    }


def generate_chain(path: Path, tables: int) -> None:
    """``tables`` tables, each with a foreign key to the one before it."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("BEGIN")
    for i in range(tables):
        ref = f", parent_id INTEGER REFERENCES t{i - 1} (id)" if i else ""
        conn.execute(f"CREATE TABLE t{i} (id INTEGER PRIMARY KEY, name TEXT{ref})")
    conn.commit()
    conn.close()


def large_schema(folder: Path, tables: int, repeats: int) -> dict[str, object]:
    """Tool latencies on a schema of ``tables`` FK-chained tables (see the module docstring)."""
    path = folder / "chain.sqlite"
    generate_chain(path, tables)
    last = f"t{tables - 1}"
    figures: dict[str, object] = {"tables": tables}
    with open_readonly(path) as db:
        cold = time.perf_counter()
        ToolBox(db).list_tables()
        figures["first_call_reads_schema_ms"] = round((time.perf_counter() - cold) * 1000, 2)
        calls: dict[str, Callable[[], ToolOutput]] = {
            "list_tables": lambda: ToolBox(db).list_tables(),
            f"join_path(t0, {last})": lambda: ToolBox(db).join_path("t0", last),
            "foreign_keys(all)": lambda: ToolBox(db).foreign_keys(),
            "foreign_keys(one table)": lambda: ToolBox(db).foreign_keys("t5"),
        }
        for name, call in calls.items():
            timing = time_calls(call, repeats)
            figures[name] = timing
            print(
                f"{tables:,} tables: {name:28s} p50 {timing['p50_ms']:8.2f} ms p95 {timing['p95_ms']:8.2f} ms"
            )
    print(f"{tables:,} tables: first call (reads the schema) {figures['first_call_reads_schema_ms']} ms")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (under a minute)")
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows in the big table")
    parser.add_argument("--tables", type=int, default=10_000, help="tables in the large-schema run")
    args = parser.parse_args(argv)
    repeats = 5 if args.quick else 20
    with tempfile.TemporaryDirectory(prefix="sqale-bench-") as folder:
        path = Path(folder) / "bench.sqlite"
        gen_s = generate(path, args.rows)
        print(f"generated {args.rows:,} rows in {gen_s:.1f} s ({path.stat().st_size / 1e6:.0f} MB)")
        figures: dict[str, object] = {"rows": args.rows, "generate_s": round(gen_s, 2), "quick": args.quick}
        with open_readonly(path) as db:
            box = ToolBox(db)
            cold = time.perf_counter()
            box.list_tables()
            cold_ms = (time.perf_counter() - cold) * 1000
            calls: dict[str, Callable[[], ToolOutput]] = {
                "list_tables": box.list_tables,
                "describe_table": lambda: box.describe_table("orders"),
                "foreign_keys": lambda: box.foreign_keys(),
                "join_path": lambda: box.join_path("customers", "order_items"),
                "sample_rows": lambda: box.sample_rows("orders", 5),
                "distinct_values(status: 4 values, full scan)": lambda: box.distinct_values(
                    "orders", "status", 20
                ),
                "distinct_values(customer_id: stops early)": lambda: box.distinct_values(
                    "orders", "customer_id", 20
                ),
                "run_query(group by over 2M rows)": lambda: box.run_query(
                    "SELECT status, count(*), sum(amount) FROM orders GROUP BY status"
                ),
                "run_query(point lookup)": lambda: box.run_query("SELECT * FROM orders WHERE id = 123456"),
                "submit_sql(join + filter)": lambda: box.submit_sql(
                    "SELECT c.country, count(*) FROM orders o JOIN customers c ON c.id = o.customer_id "
                    "WHERE o.id < 50000 GROUP BY c.country"
                ),
            }
            tool_figures = {"list_tables(cold, reads schema)": {"ms": round(cold_ms, 2)}}
            for name, call in calls.items():
                tool_figures[name] = time_calls(call, repeats)
                p50, p95 = tool_figures[name]["p50_ms"], tool_figures[name]["p95_ms"]
                print(f"{name:50s} p50 {p50:9.2f} ms  p95 {p95:9.2f} ms")
        figures["tools"] = tool_figures
        limit_s = 0.5
        figures["time_limit_s"] = limit_s
        over = overshoot(path, limit_s, 3 if args.quick else 10)
        figures["overshoot_ms"] = over
        for name, value in over.items():
            median, worst = value["median_ms"], value["max_ms"]
            print(
                f"overshoot past a {limit_s} s limit, {name:16s} median {median:7.2f} ms  max {worst:7.2f} ms"
            )
        figures["interrupt_ms"] = interrupt_latency(path, 4 if args.quick else 12)
        print(f"interrupt() to query end: {figures['interrupt_ms']}")
        figures["large_schema"] = large_schema(Path(folder), args.tables, 3 if args.quick else 10)
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
