"""``sqale-desktop eval ...``: score SQL by execution, run agent episodes over question sets, report.

The work is done in ``sqale_desktop.core.eval``; this module parses options, prints progress and
results, and turns known problems into a message and an exit status: 0 success, 1 a known
problem (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from sqale_desktop.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from sqale_desktop.commands.agent_commands import add_settings_flags
from sqale_desktop.core.runtime import COMMAND_ENGINES

if TYPE_CHECKING:
    from sqale_desktop.core.runtime import Runtime

FORMAT_CHOICES = ("plain", "spider", "bird", "sqale")
METRIC_CHOICES = ("sqale", "spider", "bird")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    group = subparsers.add_parser(
        "eval",
        help="evaluate text-to-SQL by execution: score predictions, run the agent over question sets",
        description="Evaluate by execution match, as the SQaLe paper does. Exit status: 0 ok, "
        "1 a known problem (message on stderr), 2 bad usage.",
    )
    sub = group.add_subparsers(dest="eval_command", metavar="ACTION", required=True)

    p = sub.add_parser(
        "score",
        help="score SQL produced elsewhere against a question set's gold queries",
        description="Score predicted SQL by execution. PRED is JSON Lines of "
        '{"id": <question id>, "sql": "<predicted SQL>"}. Both queries run read-only with a time limit.',
    )
    _question_args(p)
    p.add_argument(
        "--predictions", required=True, metavar="PRED.jsonl", help="predicted SQL, one JSON line each"
    )
    _metric_arg(p)
    p.add_argument("--timeout", type=float, default=30.0, metavar="S", help="time limit per query (30 s)")
    p.add_argument("--json", action="store_true", help="print one JSON object with every question's verdict")
    p.set_defaults(handler=run_score)

    p = sub.add_parser(
        "run",
        help="run agent episodes over a question set and score each by execution",
        description="Run one agent episode per question, score it by execution and save it at once "
        "to RUN_DIR/episodes.jsonl (Ctrl+C loses nothing; --resume continues). Exit status: 0 every "
        "question was run, 1 stopped early, an episode ended in an engine or database error, or another "
        "known problem, 2 bad usage.",
    )
    _question_args(p)
    p.add_argument(
        "--engine",
        choices=COMMAND_ENGINES,
        help="llama: the model in-process (default), one episode at a time; openai: OpenAI-compatible "
        "server(s) (--base-url); replay: scripted completions (--replay)",
    )
    p.add_argument(
        "--model", metavar="GGUF_PATH", help="GGUF model file (llama; default: the installed model)"
    )
    p.add_argument(
        "--model-dir", metavar="DIR", help="folder with the model's sqale_agent.py (default: the GGUF's)"
    )
    p.add_argument(
        "--base-url",
        action="append",
        metavar="URL",
        help="OpenAI-compatible server; repeat to spread episodes over several servers",
    )
    p.add_argument("--server-model", metavar="NAME", help="model name to ask the servers for")
    p.add_argument(
        "--replay",
        metavar="FILE",
        help='replay scripts: JSON {"<id>": [completions]} or JSON Lines {"id", "completions"}; '
        "the word 'gold' submits each gold query (a self-check of the harness)",
    )
    p.add_argument("--concurrency", type=int, default=1, metavar="N", help="episodes at once (1)")
    p.add_argument(
        "--condition",
        default="full",
        metavar="gold|distractors:K|full",
        help="schema size: the gold tables only, plus K distractor tables (32), or the full schema (default)",
    )
    p.add_argument("--limit", type=int, metavar="N", help="only the first N questions")
    p.add_argument("--sample", type=int, metavar="N", help="a random sample of N questions (--seed)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed for --sample and distractors (0)")
    p.add_argument("--out", metavar="RUN_DIR", help="run folder (default: ./sqale-eval-<time>)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run: finished questions are not run again")
    _metric_arg(p)
    p.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="time limit per scoring query (30 s)"
    )
    p.add_argument(
        "--params",
        type=float,
        metavar="N",
        help="model parameters for the TFLOPs estimate (default: from the GGUF; unknown for servers)",
    )
    add_settings_flags(p, limits=False)
    p.set_defaults(handler=run_run)

    p = sub.add_parser(
        "report",
        help="write report.md and a self-contained report.html for a run folder",
        description="Summarise a run: accuracy per condition with 95 % Wilson intervals, how episodes "
        "ended, tool calls, rounds, exploration, time and tokens, with charts and the run's settings.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a folder written by 'eval run'")
    p.set_defaults(handler=run_report)

    p = sub.add_parser(
        "compare",
        help="compare two runs question by question (McNemar's test) and list the flipped questions",
        description="Pair the questions of two runs (by id and condition), print the accuracy "
        "difference with McNemar's paired test, and the questions each run alone got right.",
    )
    p.add_argument("run_a", metavar="RUN_A", help="a run folder")
    p.add_argument("run_b", metavar="RUN_B", help="another run folder")
    p.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    p.set_defaults(handler=run_compare)


def _question_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "questions",
        metavar="QUESTIONS",
        help="question set: questions.json/.jsonl, Spider or BIRD dev.json, SQaLe Queries parquet "
        "(file, folder or hub id)",
    )
    p.add_argument("--format", choices=FORMAT_CHOICES, help="question-set format (default: detected)")
    p.add_argument(
        "--schemas",
        metavar="PATH",
        help="SQaLe Schemas parquet (file, folder or hub id; default: found next to QUESTIONS)",
    )
    p.add_argument("--split", default="test", help="SQaLe split to read from a folder or the hub (test)")
    p.add_argument(
        "--phrasing",
        default="evidence_supported",
        metavar="NAME",
        help="SQaLe phrasing: verbose, evidence_supported (default), casual, ...",
    )


def _metric_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metric",
        choices=METRIC_CHOICES,
        default="sqale",
        help="sqale: result multisets, order iff the outermost ORDER BY (default); spider: the "
        "official Spider execution match; bird: BIRD's set equality",
    )


def _load_questions(args: argparse.Namespace) -> Any:
    from sqale_desktop.core.eval.questions import load_question_set

    qset = load_question_set(
        args.questions, args.format, phrasing=args.phrasing, schemas=args.schemas, split=args.split
    )
    for note in qset.notes:
        print(f"note: {note}", file=sys.stderr)
    return qset


def run_score(args: argparse.Namespace) -> int:
    from sqale_desktop.core.eval.questions import QuestionSetError
    from sqale_desktop.core.eval.scorer import Scorer, read_predictions, score_questions

    if not args.timeout > 0:
        print("sqale-desktop eval score: --timeout must be positive", file=sys.stderr)
        return EXIT_USAGE
    try:
        qset = _load_questions(args)
        predictions = read_predictions(Path(args.predictions))
    except (QuestionSetError, ValueError) as exc:
        print(f"sqale-desktop eval score: {exc}", file=sys.stderr)
        return EXIT_FAILED
    known = {q.key for q in qset.questions}
    unknown = [key for key in predictions if key not in known]
    if unknown:
        print(
            f"note: {len(unknown)} predictions name no question of the set (first: {unknown[0]})",
            file=sys.stderr,
        )
    summary = score_questions(qset.questions, predictions, Scorer(args.metric, time_limit_s=args.timeout))
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        _print_score(summary)
    return EXIT_OK


def _print_score(summary: dict[str, Any]) -> None:
    total = summary["total"]
    print(
        f"{summary['metric']}: {summary['correct']}/{total} correct ({100 * summary['accuracy']:.1f} %), "
        f"{summary['failed_to_execute']} predictions failed to execute"
        + (f", {summary['no_prediction']} questions have no prediction" if summary["no_prediction"] else "")
        + (f", {summary['gold_failed']} gold queries failed" if summary["gold_failed"] else "")
    )
    for entry in summary["questions"]:
        if entry["gold_error"]:
            print(f"  {entry['id']}: gold query failed: {entry['gold_error']}")


class _Usage(Exception):
    """Options that cannot work together; the message says which."""


def run_run(args: argparse.Namespace) -> int:
    from sqale_desktop.core.errors import KnownError
    from sqale_desktop.core.eval.conditions import ConditionError, parse_condition
    from sqale_desktop.core.runtime import ChoiceError

    try:
        condition = parse_condition(args.condition)
        if args.concurrency < 1:
            raise _Usage("--concurrency must be at least 1")
        if args.out and args.resume and Path(args.out) != Path(args.resume):
            raise _Usage("give --out or --resume, not both")
        runtime = _runtime(args)
        qset = _load_questions(args)
        qset.select(limit=args.limit, sample=args.sample, seed=args.seed)
        run_dir = _run_dir(args)
    except (_Usage, ConditionError, ChoiceError) as exc:
        print(f"sqale-desktop eval run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KnownError as exc:  # an unreadable question set
        print(f"sqale-desktop eval run: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not runtime.concurrent and args.concurrency > 1:
        print(f"note: the in-process {runtime.kind} engine runs one episode at a time", file=sys.stderr)
        args.concurrency = 1
    from sqale_desktop.core.eval.engines import open_engines

    with ExitStack() as stack:  # the run's engines are closed when it is over
        try:
            engines = open_engines(
                runtime, stack, base_urls=args.base_url or (), replay=args.replay,
                model=Path(args.model) if args.model else None, parameters=args.params,
            )  # fmt: skip
        except KnownError as exc:  # a replay file or a model that cannot be read
            print(f"sqale-desktop eval run: {exc}", file=sys.stderr)
            return EXIT_FAILED
        try:
            _write_run_json(run_dir, args, qset, condition, runtime.kind, engines.facts, engines.protocol)
        except _Usage as exc:
            print(f"sqale-desktop eval run: {exc}", file=sys.stderr)
            return EXIT_USAGE
        return _execute(run_dir, args, qset, condition, engines.engine_for, engines.facts, runtime)


def _run_dir(args: argparse.Namespace) -> Path:
    if args.resume:
        path = Path(args.resume)
        if not (path / "run.json").is_file():
            raise _Usage(f"{path} is not a run folder (no run.json)")
        return path
    if args.out:
        path = Path(args.out)
        if (path / "episodes.jsonl").exists():
            raise _Usage(f"{path} already holds a run: use --resume {path} to continue it")
        return path
    from sqale_desktop.core.eval.run_settings import now

    return Path(f"sqale-eval-{now().replace(':', '').replace('+0000', 'Z')}")


def _runtime(args: argparse.Namespace) -> Runtime:
    """``core.runtime.choose`` over the app's settings with the flags over them, as ``ask`` does."""
    from sqale_desktop.commands.agent_commands import _api_key, settings_from
    from sqale_desktop.core.runtime import EngineFlags, choose

    flags = EngineFlags(
        engine=args.engine,
        model=Path(args.model) if args.model else None,
        model_dir=Path(args.model_dir) if args.model_dir else None,
        base_url=args.base_url[0] if args.base_url else None,
        server_model=args.server_model,
        api_key=_api_key,
        replay=Path(args.replay) if args.replay else None,
    )
    return choose(settings_from(args), flags)


def _write_run_json(
    run_dir: Path,
    args: argparse.Namespace,
    qset: Any,
    condition: Any,
    kind: str,
    engine: dict[str, Any],
    protocol: Any,
) -> None:
    from sqale_desktop import __version__
    from sqale_desktop.core.eval.run_settings import machine, now, protocol_facts

    settings = {
        "questions": str(Path(qset.source).resolve()) if Path(qset.source).exists() else qset.source,
        "format": qset.format,
        "phrasing": qset.phrasing,
        "question_count": len(qset.questions),
        "notes": qset.notes,
        "condition": condition.label,
        "metric": args.metric,
        "seed": args.seed,
        "limit": args.limit,
        "sample": args.sample,
    }
    path = run_dir / "run.json"
    if args.resume:
        from sqale_desktop.core.eval.harness import RunFileError, read_run_json

        try:
            old = read_run_json(run_dir)
        except RunFileError as exc:
            raise _Usage(str(exc)) from None
        for key in ("questions", "condition", "metric", "seed", "phrasing"):
            if old.get("settings", {}).get(key) != settings[key]:
                raise _Usage(
                    f"--resume {run_dir}: the run used {key} {old.get('settings', {}).get(key)!r}, "
                    f"not {settings[key]!r}"
                )
        old.setdefault("resumed", []).append(now())
        path.write_text(json.dumps(old, indent=2, ensure_ascii=False), encoding="utf-8")
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    document = {
        "app_version": __version__,
        "started": now(),
        "settings": settings,
        "engine": engine,
        "concurrency": args.concurrency,
        "protocol": protocol_facts(protocol),
        "machine": machine(),
    }
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False, default=str), encoding="utf-8")


def _execute(
    run_dir: Path,
    args: argparse.Namespace,
    qset: Any,
    condition: Any,
    engine_for: Any,
    engine: dict[str, Any],
    runtime: Runtime,
) -> int:
    from sqale_desktop.core.eval.harness import EvalRun, RunOptions, ServerUnreachable, finished_keys
    from sqale_desktop.core.paths import cache_dir

    options = RunOptions(
        metric=args.metric,
        condition=condition,
        seed=args.seed,
        concurrency=args.concurrency,
        time_limit_s=args.timeout,
        parameters=engine.get("parameters"),
    )
    run = EvalRun(
        run_dir, engine_for, runtime.episode, runtime.open_database, options,
        cache=cache_dir() / "eval" / "reduced",
    )  # fmt: skip
    done = finished_keys(run_dir)
    todo = sum(1 for q in qset.questions if q.key not in done)
    print(f"run folder: {run_dir} ({todo} of {len(qset.questions)} questions to run)", file=sys.stderr)
    bar = _progress(todo)
    correct = count = 0
    errors: list[str] = []
    started = time.monotonic()
    with _cancel_on_ctrl_c(run):
        try:
            for record in run.run(qset.questions):
                count += 1
                correct += bool(record["correct"])
                if record["ended_by"] == "error":
                    errors.append(f"{record['id']}: {record['error']}")
                if bar is not None:
                    minutes = max(time.monotonic() - started, 1e-9) / 60
                    bar.set_postfix(acc=f"{100 * correct / count:.1f}%", ep_min=f"{count / minutes:.1f}")
                    bar.update(1)
        except ServerUnreachable as exc:
            if bar is not None:
                bar.close()
                bar = None
            print(f"sqale-desktop eval run: {exc}", file=sys.stderr)
            return EXIT_FAILED
        finally:
            if bar is not None:
                bar.close()
            _record_usage(run_dir)
    if run.cancelled:
        print(f"stopped: {count} episodes saved; continue with --resume {run_dir}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{correct}/{count} correct this session; episodes in {run_dir / 'episodes.jsonl'}")
    if errors:
        print(
            f"sqale-desktop eval run: {len(errors)} episodes ended in an error (first: {errors[0]}); "
            f"--resume {run_dir} runs them again",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _record_usage(run_dir: Path) -> None:
    """``run.json``'s ``usage``: the tokens the server reported for the run's episodes and their
    cost at the configured prices, updated whenever a session of the run ends (a stop included)."""
    from sqale_desktop.core.eval.harness import (
        RUN_FILE,
        RunFileError,
        read_episodes,
        read_run_json,
        usage_totals,
    )
    from sqale_desktop.core.server_usage import Prices, ServerUsage, usage_line

    totals = usage_totals(read_episodes(run_dir))
    if totals is None:
        return
    try:
        document = read_run_json(run_dir)
    except RunFileError as exc:
        print(f"sqale-desktop eval run: the usage totals were not saved: {exc}", file=sys.stderr)
        return
    document["usage"] = totals
    (run_dir / RUN_FILE).write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")
    prices = totals["prices"]
    summed = ServerUsage(
        **{
            k: totals[k] for k in ("input_tokens", "cached_tokens", "output_tokens", "requests", "unreported")
        },
        cost_usd=totals["cost_usd"],
        prices=Prices(**prices) if prices else None,
    )
    print(f"server usage of the run: {usage_line(summed)}", file=sys.stderr)


def _progress(total: int) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="ep", desc="eval", file=sys.stderr, dynamic_ncols=True)


@contextmanager
def _cancel_on_ctrl_c(run: Any) -> Iterator[None]:
    """Ctrl+C stops the run like the app's Stop button; finished episodes are already saved."""

    def handler(signum: int, frame: FrameType | None) -> None:
        # cancel() interrupts databases and takes locks: never on the signal handler's stack
        threading.Thread(target=run.cancel, name="eval-stop", daemon=True).start()

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread (tests calling main() from a worker)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_report(args: argparse.Namespace) -> int:
    from sqale_desktop.core.eval.report import ReportError, write_report

    try:
        md, page = write_report(Path(args.run_dir))
    except ReportError as exc:
        print(f"sqale-desktop eval report: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"wrote {md} and {page}")
    return EXIT_OK


def run_compare(args: argparse.Namespace) -> int:
    from sqale_desktop.core.eval.report import ReportError, compare_runs

    try:
        comparisons = compare_runs(Path(args.run_a), Path(args.run_b))
    except ReportError as exc:
        print(f"sqale-desktop eval compare: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(
            json.dumps(
                {
                    "run_a": args.run_a,
                    "run_b": args.run_b,
                    "conditions": [
                        {
                            "condition": c.condition,
                            "paired": c.paired,
                            "accuracy_a": c.accuracy_a,
                            "accuracy_b": c.accuracy_b,
                            "difference": c.accuracy_b - c.accuracy_a,
                            "only_a_correct": c.only_a,
                            "only_b_correct": c.only_b,
                            "p_value": c.test.p_value,
                            "test": f"McNemar, {c.test.method}",
                        }
                        for c in comparisons
                    ],
                },
                ensure_ascii=False,
            )
        )
        return EXIT_OK
    for c in comparisons:
        print(
            f"{c.condition}: {c.paired} paired questions; A {100 * c.accuracy_a:.1f} %, "
            f"B {100 * c.accuracy_b:.1f} %, B - A {100 * (c.accuracy_b - c.accuracy_a):+.1f} points; "
            f"McNemar ({c.test.method}) p = {c.test.p_value:.4g}"
        )
        print(f"  only A right ({len(c.only_a)}): {', '.join(map(str, c.only_a)) or '-'}")
        print(f"  only B right ({len(c.only_b)}): {', '.join(map(str, c.only_b)) or '-'}")
    return EXIT_OK
