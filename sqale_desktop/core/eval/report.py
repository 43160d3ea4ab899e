"""Reports on a run folder (``report.md`` and a self-contained ``report.html``) and run comparisons.

Figures per condition: accuracy with its 95 % Wilson interval, the ended_by mix, tool calls and
rounds per episode, the share of episodes that opened every gold table and the mean share of the
gold query's literals seen, seconds and tokens per episode.  Each question counts once, with its
last recorded episode (a resumed run may hold an earlier errored attempt).  Charts are drawn by
matplotlib (Agg backend, no display needed) and embedded in the HTML as base64 PNG, so the file
opens anywhere without a network; ``report.md`` links the same PNGs, written next to it.

A run over a conversational set also gets, per follow-up condition, execution accuracy at each turn
position and the tokens evaluated per follow-up (``conversations.summarise``).

``compare_runs`` pairs two runs by question and condition and tests the accuracy difference
with McNemar's test (:mod:`.stats`), listing the questions that flipped.
"""

from __future__ import annotations

import base64
import html
import io
import json
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqale_desktop.core.errors import KnownError
from sqale_desktop.core.eval import conversations
from sqale_desktop.core.eval.harness import RUN_FILE, RunFileError, read_run_json
from sqale_desktop.core.eval.records import latest_by_question, read_episodes, usage_totals
from sqale_desktop.core.eval.stats import McNemar, mcnemar, wilson
from sqale_desktop.core.server_usage import format_usd

CHARTS_DIR = "report_files"


class ReportError(KnownError):
    """A folder that is not a run, or a run without episodes; the message says which."""


@dataclass
class ConditionSummary:
    condition: str
    episodes: int
    correct: int
    ci: tuple[float, float]
    ended_by: dict[str, int]
    tool_calls: list[int]
    rounds: list[int]
    gold_opened: list[bool]
    literals_seen: list[float]
    seconds: list[float]
    prompt_tokens: list[int]
    completion_tokens: list[int]
    tflops: list[float]

    @property
    def accuracy(self) -> float:
        return self.correct / self.episodes if self.episodes else 0.0


@dataclass
class RunSummary:
    run_dir: Path
    settings: dict[str, Any]
    conditions: list[ConditionSummary] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    """The server-reported tokens and their cost, summed over the run (``records.usage_totals``)."""
    turns: dict[str, Any] = field(default_factory=dict)
    """A conversational set's figures per follow-up condition (``conversations.summarise``)."""


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``run.json`` and the last episode of every question."""
    settings_path = run_dir / RUN_FILE
    if not settings_path.is_file():
        raise ReportError(f"{run_dir} is not a run folder (no {RUN_FILE})")
    try:
        settings = read_run_json(run_dir)
    except RunFileError as exc:
        raise ReportError(str(exc)) from None
    records = list(latest_by_question(read_episodes(run_dir)).values())
    if not records:
        raise ReportError(f"{run_dir} holds no finished episodes yet")
    return settings, records


def summarise(run_dir: Path) -> RunSummary:
    settings, records = load_run(run_dir)
    summary = RunSummary(
        run_dir, settings, usage=usage_totals(records), turns=conversations.summarise(records)
    )
    by_condition: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_condition.setdefault(str(record.get("condition")), []).append(record)
    for condition, group in by_condition.items():
        correct = sum(bool(r.get("correct")) for r in group)
        summary.conditions.append(
            ConditionSummary(
                condition=condition,
                episodes=len(group),
                correct=correct,
                ci=wilson(correct, len(group)),
                ended_by=dict(Counter(str(r.get("ended_by")) for r in group).most_common()),
                tool_calls=[int(r["tool_calls"]["total"]) for r in group],
                rounds=[int(r["rounds"]) for r in group],
                gold_opened=[
                    bool(r["gold_tables_opened"]) for r in group if r.get("gold_tables_opened") is not None
                ],
                literals_seen=[
                    float(r["literals_seen"]) for r in group if r.get("literals_seen") is not None
                ],
                seconds=[float(r["seconds"]) for r in group],
                prompt_tokens=[int(r["tokens"]["prompt"]) for r in group],
                completion_tokens=[int(r["tokens"]["completion"]) for r in group],
                tflops=[float(r["tflops"]) for r in group if r.get("tflops") is not None],
            )
        )
    return summary


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _fmt(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "–" if value is None else f"{value:.{digits}f}{suffix}"


def _share(values: Sequence[bool | float]) -> str:
    return (
        "–" if not values else f"{100 * statistics.fmean(float(v) for v in values):.1f} % (n={len(values)})"
    )


def table_rows(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    """The per-condition figures as a header and rows of text (shared by Markdown and HTML)."""
    header = [
        "condition", "episodes", "accuracy", "95 % CI", "tool calls / ep", "rounds / ep",
        "gold tables opened", "literals seen", "seconds / ep", "prompt tokens / ep",
        "completion tokens / ep", "TFLOPs / ep",
    ]  # fmt: skip
    rows = []
    for c in summary.conditions:
        rows.append(
            [
                c.condition,
                str(c.episodes),
                f"{100 * c.accuracy:.1f} % ({c.correct}/{c.episodes})",
                f"{100 * c.ci[0]:.1f}–{100 * c.ci[1]:.1f} %",
                f"{_fmt(_mean(c.tool_calls))} (median {_fmt(_median(c.tool_calls), 0)})",
                _fmt(_mean(c.rounds)),
                _share(c.gold_opened),
                _share(c.literals_seen),
                f"{_fmt(_mean(c.seconds), 2)} (median {_fmt(_median(c.seconds), 2)})",
                _fmt(_mean(c.prompt_tokens), 0),
                _fmt(_mean(c.completion_tokens), 0),
                _fmt(_mean(c.tflops), 3),
            ]
        )
    return header, rows


def turn_rows(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    """A conversational set's figures per follow-up condition: accuracy at each turn position and
    the tokens evaluated per follow-up (none for a run of single questions)."""
    if not summary.turns:
        return [], []
    positions = sorted({int(p) for figures in summary.turns.values() for p in figures["by_position"]})
    header = ["follow-ups", "turns", *(f"turn {p} accuracy" for p in positions)]
    header += ["evaluated tokens / follow-up", "follow-ups asked"]
    rows = []
    for condition, figures in summary.turns.items():
        cells = [condition, str(figures["turns"])]
        for position in positions:
            at = figures["by_position"].get(str(position))
            cells.append("–" if at is None else f"{100 * at['accuracy']:.1f} % (n={at['n']})")
        cells.append(_fmt(figures["evaluated_tokens_per_follow_up"], 0))
        forms = figures["follow_up_forms"]
        cells.append(", ".join(f"{form} {n}" for form, n in sorted(forms.items())) or "–")
        rows.append(cells)
    return header, rows


def usage_lines(usage: dict[str, Any] | None) -> list[str]:
    """The report's words for the run's server usage; none for a run on a local model."""
    if not usage:
        return []
    cached = usage["cached_tokens"]
    lines = [
        f"{usage['input_tokens']:,} input tokens ({cached:,} of them cached), "
        f"{usage['output_tokens']:,} output tokens, over {usage['requests']:,} requests"
    ]
    if usage["unreported"]:
        lines.append(f"{usage['unreported']:,} answers reported no usage: the cost is unknown")
    prices = usage.get("prices")
    if usage.get("cost_usd") is not None and prices:
        rates = (
            f"${prices['input']:g} input, ${prices['cached_input']:g} cached input, "
            f"${prices['output']:g} output per million tokens"
        )
        where = prices.get("source") or "the prices in the settings"
        lines.append(f"cost {format_usd(usage['cost_usd'])} at {rates} ({where})")
    return lines


def settings_lines(settings: dict[str, Any]) -> list[tuple[str, str]]:
    """What produced the run: model file and sha256, quantization, engine, sampling, prompt, app, machine."""
    engine = settings.get("engine", {})
    model = engine.get("model") or {}
    protocol = settings.get("protocol", {})
    run = settings.get("settings", {})
    lines = [
        ("questions", f"{run.get('questions')} ({run.get('format')}, {run.get('question_count')} questions)"),
        ("phrasing", str(run.get("phrasing") or "as written")),
        ("metric", str(run.get("metric"))),
        ("engine", str(engine.get("kind"))),
        ("servers", ", ".join(engine.get("base_urls") or []) or "–"),
        ("server model", str(engine.get("server_model") or "–")),
        ("model file", str(model.get("path") or "–")),
        ("model sha256", str(model.get("sha256") or "–")),
        ("quantization", str(model.get("quantization") or "–")),
        ("parameters", str(engine.get("parameters") or model.get("parameters") or "unknown")),
        ("replay", str(engine.get("replay") or "–")),
        ("follow-ups", ", ".join(run.get("follow_ups") or []) or "–"),
        ("concurrency", str(settings.get("concurrency"))),
        ("sampling", json.dumps(protocol.get("sampling"))),
        ("sampling source", str(protocol.get("sampling_source"))),
        ("prompt source", str(protocol.get("prompt_source"))),
        ("seed", str(run.get("seed"))),
        ("app version", str(settings.get("app_version"))),
        ("started", str(settings.get("started"))),
        ("machine", json.dumps(settings.get("machine"))),
    ]
    return [(k, v) for k, v in lines]


# -- charts -----------------------------------------------------------------------------------


def charts(summary: RunSummary) -> dict[str, bytes]:
    """PNG charts by file name, drawn with matplotlib's Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    out: dict[str, bytes] = {}
    names = [c.condition for c in summary.conditions]

    def save(fig: Any, name: str) -> None:
        buffer = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buffer, format="png", dpi=100)
        plt.close(fig)
        out[name] = buffer.getvalue()

    fig, ax = plt.subplots(figsize=(6, 3.5))
    acc = [100 * c.accuracy for c in summary.conditions]
    # At 0 % and 100 % the interval's bound and the accuracy are equal up to rounding, and a
    # difference of -1e-16 is a negative error bar, which matplotlib refuses: clamp at zero.
    low = [max(0.0, 100 * (c.accuracy - c.ci[0])) for c in summary.conditions]
    high = [max(0.0, 100 * (c.ci[1] - c.accuracy)) for c in summary.conditions]
    ax.bar(names, acc, yerr=[low, high], capsize=6, color="#4472c4")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Accuracy per condition (95 % Wilson interval)")
    save(fig, "accuracy.png")

    fig, ax = plt.subplots(figsize=(6, 3.5))
    kinds = sorted({k for c in summary.conditions for k in c.ended_by})
    bottom = [0.0] * len(names)
    for kind in kinds:
        values = [100 * c.ended_by.get(kind, 0) / c.episodes for c in summary.conditions]
        ax.bar(names, values, bottom=bottom, label=kind)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("episodes (%)")
    ax.set_title("How episodes ended")
    ax.legend(fontsize="small")
    save(fig, "ended_by.png")

    for name, title, attr in (
        ("tool_calls.png", "Tool calls per episode", "tool_calls"),
        ("rounds.png", "Rounds per episode", "rounds"),
        ("seconds.png", "Seconds per episode", "seconds"),
        ("tokens.png", "Prompt tokens per episode", "prompt_tokens"),
    ):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for c in summary.conditions:
            ax.hist(getattr(c, attr), bins=20, alpha=0.6, label=c.condition)
        ax.set_title(title)
        ax.set_ylabel("episodes")
        ax.legend(fontsize="small")
        save(fig, name)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.38
    xs = list(range(len(names)))
    opened = [
        100 * statistics.fmean(map(float, c.gold_opened)) if c.gold_opened else 0 for c in summary.conditions
    ]
    seen = [100 * statistics.fmean(c.literals_seen) if c.literals_seen else 0 for c in summary.conditions]
    ax.bar([x - width / 2 for x in xs], opened, width, label="opened every gold table")
    ax.bar([x + width / 2 for x in xs], seen, width, label="gold literals seen")
    ax.set_xticks(xs, names)
    ax.set_ylim(0, 100)
    ax.set_ylabel("%")
    ax.set_title("Exploration")
    ax.legend(fontsize="small")
    save(fig, "exploration.png")
    return out


# -- writing ----------------------------------------------------------------------------------


def write_report(run_dir: Path) -> tuple[Path, Path]:
    """Write ``report.md`` (with PNGs in ``report_files/``) and a self-contained ``report.html``."""
    summary = summarise(run_dir)
    images = charts(summary)
    (run_dir / CHARTS_DIR).mkdir(exist_ok=True)
    for name, data in images.items():
        (run_dir / CHARTS_DIR / name).write_bytes(data)
    header, rows = table_rows(summary)
    settings = settings_lines(summary.settings)

    md = [f"# Evaluation report: {run_dir.name}", "", "## Results", ""]
    md.append("| " + " | ".join(header) + " |")
    md.append("|" + "---|" * len(header))
    md.extend("| " + " | ".join(row) + " |" for row in rows)
    turn_header, turns = turn_rows(summary)
    if turns:
        md += ["", "## Follow-ups: accuracy per turn position", ""]
        md.append("| " + " | ".join(turn_header) + " |")
        md.append("|" + "---|" * len(turn_header))
        md.extend("| " + " | ".join(row) + " |" for row in turns)
    md += ["", "## How episodes ended", ""]
    for c in summary.conditions:
        mix = ", ".join(f"{k} {v}" for k, v in c.ended_by.items())
        md.append(f"- {c.condition}: {mix}")
    usage = usage_lines(summary.usage)
    if usage:
        md += ["", "## Server usage", ""]
        md.extend(f"- {line}" for line in usage)
    md += ["", "## Charts", ""]
    md.extend(f"![{name}]({CHARTS_DIR}/{name})" for name in images)
    md += ["", "## Settings", ""]
    md.extend(f"- **{k}**: `{v}`" for k, v in settings)
    md_path = run_dir / "report.md"
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")

    esc = html.escape
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>Evaluation report: {esc(run_dir.name)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}img{max-width:48%;margin:4px}</style>",
        f"</head><body><h1>Evaluation report: {esc(run_dir.name)}</h1><h2>Results</h2><table><tr>",
        "".join(f"<th>{esc(h)}</th>" for h in header),
        "</tr>",
        "".join("<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in rows),
        "</table>",
    ]
    if turns:
        parts.append("<h2>Follow-ups: accuracy per turn position</h2><table><tr>")
        parts.append("".join(f"<th>{esc(h)}</th>" for h in turn_header) + "</tr>")
        parts.extend("<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in turns)
        parts.append("</table>")
    parts.append("<h2>How episodes ended</h2><ul>")
    for c in summary.conditions:
        mix = ", ".join(f"{k} {v}" for k, v in c.ended_by.items())
        parts.append(f"<li>{esc(c.condition)}: {esc(mix)}</li>")
    parts.append("</ul>")
    if usage:
        parts.append("<h2>Server usage</h2><ul>")
        parts.extend(f"<li>{esc(line)}</li>" for line in usage)
        parts.append("</ul>")
    parts.append("<h2>Charts</h2>")
    for name, data in images.items():
        encoded = base64.b64encode(data).decode("ascii")
        parts.append(f"<img alt='{esc(name)}' src='data:image/png;base64,{encoded}'>")
    parts.append("<h2>Settings</h2><table>")
    parts.extend(f"<tr><th>{esc(k)}</th><td><code>{esc(v)}</code></td></tr>" for k, v in settings)
    parts.append("</table></body></html>")
    html_path = run_dir / "report.html"
    html_path.write_text("\n".join(parts), encoding="utf-8")
    return md_path, html_path


# -- comparing --------------------------------------------------------------------------------


@dataclass
class ConditionComparison:
    condition: str
    paired: int
    accuracy_a: float
    accuracy_b: float
    test: McNemar
    only_a: list[Any]  # question ids run A got right and run B wrong
    only_b: list[Any]


def compare_runs(run_a: Path, run_b: Path) -> list[ConditionComparison]:
    """Pair the runs' questions by (id, condition) and compare them per condition."""
    _, records_a = load_run(run_a)
    _, records_b = load_run(run_b)
    index_b = {(str(r["id"]), r.get("condition")): r for r in records_b}
    paired: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for rec in records_a:
        other = index_b.get((str(rec["id"]), rec.get("condition")))
        if other is not None:
            paired.setdefault(str(rec.get("condition")), []).append((rec, other))
    if not paired:
        raise ReportError(f"{run_a} and {run_b} have no question (and condition) in common")
    result = []
    for condition, pairs in paired.items():
        only_a = [a["id"] for a, b in pairs if a.get("correct") and not b.get("correct")]
        only_b = [a["id"] for a, b in pairs if b.get("correct") and not a.get("correct")]
        n = len(pairs)
        result.append(
            ConditionComparison(
                condition=condition,
                paired=n,
                accuracy_a=sum(bool(a.get("correct")) for a, _ in pairs) / n,
                accuracy_b=sum(bool(b.get("correct")) for _, b in pairs) / n,
                test=mcnemar(len(only_a), len(only_b)),
                only_a=only_a,
                only_b=only_b,
            )
        )
    return result
