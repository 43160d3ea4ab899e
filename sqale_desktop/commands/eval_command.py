"""``sqale-desktop eval ...``: score SQL by execution, run agent episodes over question sets, report.

The work is done in ``sqale_desktop.core.eval``; this module parses options, prints progress and
results, and turns known problems into a message and an exit status: 0 success, 1 a known
problem (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqale_desktop.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from sqale_desktop.commands.ctrl_c import on_ctrl_c
from sqale_desktop.commands.engine_flags import (
    add_engine_flags,
    add_settings_flags,
    base_urls,
    engine_flags,
    settings_from,
)

if TYPE_CHECKING:
    from sqale_desktop.core.eval.prepare import PreparedRun

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
    _question_args(p, conversational=True)
    add_engine_flags(
        p,
        servers=True,
        replay_help='replay scripts: JSON {"<id>": [completions]} or JSON Lines {"id", "completions"}; '
        "the word 'gold' submits each gold query (a self-check of the harness)",
    )
    p.add_argument("--concurrency", type=int, default=1, metavar="N", help="episodes at once (1)")
    p.add_argument(
        "--condition",
        default="full",
        metavar="gold|distractors:K|full",
        help="schema size: the gold tables only, plus K distractor tables (32), or the full schema (default)",
    )
    p.add_argument(
        "--follow-ups",
        metavar="standalone,continued,carried",
        help="a conversational set's follow-ups: each utterance alone, continued on the previous "
        "answer's thread (default), or carried as text in a new episode; several, comma-separated, "
        "run one after the other",
    )
    p.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="only the first N questions (interactions of a conversational set)",
    )
    p.add_argument(
        "--sample", type=int, metavar="N", help="a random sample of N questions or interactions (--seed)"
    )
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
        "ended, tool calls, rounds, exploration, time and tokens, with charts and the run's settings; "
        "for a conversational set also accuracy per turn position and tokens evaluated per follow-up.",
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


def _question_args(p: argparse.ArgumentParser, *, conversational: bool = False) -> None:
    p.add_argument(
        "questions",
        metavar="QUESTIONS",
        help="question set: questions.json/.jsonl, Spider or BIRD dev.json, SQaLe Queries parquet "
        "(file, folder or hub id)" + (", or a SParC/CoSQL conversational set" if conversational else ""),
    )
    formats = (*FORMAT_CHOICES, "sparc") if conversational else FORMAT_CHOICES
    p.add_argument("--format", choices=formats, help="question-set format (default: detected)")
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
    if conversational:
        p.add_argument(
            "--databases",
            metavar="DIR",
            help="folder a conversational set's database paths are relative to (default: the set's folder)",
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


def run_run(args: argparse.Namespace) -> int:
    from sqale_desktop.core.errors import KnownError
    from sqale_desktop.core.eval.prepare import RunRequest, RunUsageError, prepare_run
    from sqale_desktop.core.paths import cache_dir

    request = RunRequest(
        questions=args.questions, format=args.format, phrasing=args.phrasing, schemas=args.schemas,
        split=args.split, condition=args.condition, follow_ups=args.follow_ups,
        databases=Path(args.databases) if args.databases else None, metric=args.metric, seed=args.seed,
        limit=args.limit, sample=args.sample, concurrency=args.concurrency, time_limit_s=args.timeout,
        parameters=args.params, out=Path(args.out) if args.out else None,
        resume=Path(args.resume) if args.resume else None, base_urls=base_urls(args),
        replay=args.replay, model=Path(args.model) if args.model else None,
    )  # fmt: skip
    settings = settings_from(args)
    with ExitStack() as stack:  # the run's engines are closed when it is over
        try:
            prepared = prepare_run(
                request, settings, engine_flags(args), stack, cache=cache_dir() / "eval" / "reduced",
                note=lambda line: print(f"note: {line}", file=sys.stderr),
            )  # fmt: skip
        except RunUsageError as exc:
            print(f"sqale-desktop eval run: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except KnownError as exc:  # an unreadable question set, replay file or model
            print(f"sqale-desktop eval run: {exc}", file=sys.stderr)
            return EXIT_FAILED
        return _execute(prepared)


def _execute(prepared: PreparedRun) -> int:
    from sqale_desktop.core.eval.harness import ServerUnreachable

    run, run_dir = prepared.run, prepared.run_dir
    what = "turns" if prepared.follow_ups else "questions"
    print(f"run folder: {run_dir} ({prepared.todo} of {prepared.total} {what} to run)", file=sys.stderr)
    bar = _progress(prepared.todo)
    correct = count = 0
    errors: list[str] = []
    started = time.monotonic()

    def stop() -> None:
        # cancel() interrupts databases and takes locks: never on the signal handler's stack
        threading.Thread(target=run.cancel, name="eval-stop", daemon=True).start()

    # Ctrl+C stops the run like the app's Stop button; finished episodes are already saved.
    with on_ctrl_c(stop):
        try:
            for record in prepared.records():
                count += 1
                correct += record.correct
                if record.ended_by == "error":
                    errors.append(f"{record.id}: {record.error}")
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
    from sqale_desktop.core.eval.harness import RUN_FILE, RunFileError, read_run_json
    from sqale_desktop.core.eval.records import read_episodes, usage_totals
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
