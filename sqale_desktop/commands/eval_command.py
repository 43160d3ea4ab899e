"""``sqale-desktop eval ...``: score SQL by execution, run agent episodes over question sets, report.

The work is done in ``sqale_desktop.core.eval``; this module parses options, prints progress and
results, and turns known problems into a message and an exit status: 0 success, 1 a known
problem (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sqale_desktop.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE

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
        + (f", {summary['gold_failed']} gold queries failed" if summary["gold_failed"] else "")
    )
    for entry in summary["questions"]:
        if entry["gold_error"]:
            print(f"  {entry['id']}: gold query failed: {entry['gold_error']}")
