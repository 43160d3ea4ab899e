"""The three SQaLe agents, with what the paper reports of each, so a user can choose.

Figures are copied from the model cards and the project page (execution accuracy in percent on
300 questions per benchmark, agentic environment, schema withheld).  The three share base model,
tools, reward and step count; only the training corpus (and a length curriculum) differ, so the
training schema sizes are what tells them apart for a user's database.
"""

from __future__ import annotations

from dataclasses import dataclass

LARGE_SCHEMA_TABLES = 40
"""From this many tables on, the app points out that M_SQaLe was trained on large schemas."""


@dataclass(frozen=True)
class Accuracy:
    """Execution accuracy (%) as reported in the paper."""

    sqale_test: float
    bird_dev: float
    ehrsql: float


@dataclass(frozen=True)
class TrainingSchemas:
    """Size of the schemas in the training corpus (medians over the corpus' schemas)."""

    corpus: str
    median_tables: float
    median_columns: int
    median_rows_per_table: int | None


@dataclass(frozen=True)
class CatalogEntry:
    """One published SQaLe agent checkpoint (safetensors; GGUF builds are found on the hub)."""

    repo_id: str
    name: str
    summary: str
    accuracy: Accuracy
    training: TrainingSchemas
    default: bool = False


SYNSQL = CatalogEntry(
    repo_id="trl-lab/qwen3.5-2b-grpo-synsql",
    name="M_SynSQL",
    summary="Trained on SynSQL-2.5M (small schemas, 5-10 tables). Most tool calls per episode.",
    accuracy=Accuracy(sqale_test=50.7, bird_dev=44.3, ehrsql=13.3),
    training=TrainingSchemas("SynSQL-2.5M", median_tables=10, median_columns=72, median_rows_per_table=2),
    default=True,
)
SQALE = CatalogEntry(
    repo_id="trl-lab/qwen3.5-2b-grpo-sqale",
    name="M_SQaLe",
    summary="Trained on SQaLe (large real-world schemas, median 113 tables). Best on large databases.",
    accuracy=Accuracy(sqale_test=66.3, bird_dev=52.3, ehrsql=23.7),
    training=TrainingSchemas("SQaLe", median_tables=113, median_columns=538, median_rows_per_table=69),
)
BIRD = CatalogEntry(
    repo_id="trl-lab/qwen3.5-2b-grpo-bird",
    name="M_BIRD",
    summary="Trained on BIRD train (median 5 tables). Best on BIRD dev.",
    accuracy=Accuracy(sqale_test=54.0, bird_dev=54.7, ehrsql=23.7),
    training=TrainingSchemas("BIRD train", median_tables=5, median_columns=39, median_rows_per_table=3738),
)

CATALOG: tuple[CatalogEntry, ...] = (SYNSQL, SQALE, BIRD)


def default_entry() -> CatalogEntry:
    """The checkpoint selected when the user has chosen nothing (M_SynSQL, as the issue asks)."""
    return next(entry for entry in CATALOG if entry.default)


def find(repo_id: str) -> CatalogEntry | None:
    """The catalog entry for a checkpoint repository, case-insensitively (hub ids are)."""
    wanted = repo_id.casefold()
    return next((entry for entry in CATALOG if entry.repo_id.casefold() == wanted), None)


def large_schema_hint(table_count: int, current_checkpoint: str | None = None) -> str | None:
    """A sentence suggesting M_SQaLe for a database with many tables, or ``None``.

    No hint when the database is small or M_SQaLe is already the model in use (matched on the
    checkpoint a GGUF was built from, which the registry records).
    """
    if table_count < LARGE_SCHEMA_TABLES:
        return None
    if current_checkpoint is not None and find(current_checkpoint) == SQALE:
        return None
    return (
        f"This database has {table_count} tables. {SQALE.name} ({SQALE.repo_id}) was trained on large "
        f"schemas (median {SQALE.training.median_tables:g} tables) and finds the right tables more often "
        f"in big databases ({SQALE.accuracy.sqale_test:g}% vs {SYNSQL.accuracy.sqale_test:g}% for "
        f"{SYNSQL.name} on the SQaLe test set at full schema size)."
    )


CHECKPOINT_DOWNLOAD_GB = 4.6
"""The safetensors checkpoint's size on the hub (each of the three model cards: 4.6 GB on disk)."""
GGUF_Q4_K_M_GB = 1.2
"""A Q4_K_M build of the 2B model (weights 1.17 GiB, ENGINE-NOTES)."""
QUANTIZE_MINUTES_2_CORES = 1
"""F16 -> Q4_K_M quantization measured at 56 s on 2 threads (ENGINE-NOTES)."""


def suggested_entry(table_count: int | None) -> CatalogEntry:
    """The checkpoint to offer for a database: M_SQaLe from 40 tables on, else the default."""
    if table_count is not None and table_count >= LARGE_SCHEMA_TABLES:
        return SQALE
    return default_entry()


def explain_choice(table_count: int | None) -> str:
    """Why the dialog offers the checkpoint it offers, with the paper's figures.

    The default is M_SynSQL because its model card is the one that documents this app's protocol
    (the reference loop, the demo question); M_SQaLe scores highest on the SQaLe test set and was
    trained on large schemas, so it is suggested for databases with many tables.
    """
    best = max(CATALOG, key=lambda e: e.accuracy.sqale_test)
    default = default_entry()
    lines = [
        f"Default: {default.name} ({default.repo_id}), the model whose card describes the protocol this "
        f"app runs; trained on {default.training.corpus} (median {default.training.median_tables:g} tables "
        f"per schema). SQaLe test {default.accuracy.sqale_test:g}%, BIRD dev {default.accuracy.bird_dev:g}%, "
        f"EHRSQL {default.accuracy.ehrsql:g}%.",
        f"{best.name} has the best SQaLe test score ({best.accuracy.sqale_test:g}%; BIRD dev "
        f"{best.accuracy.bird_dev:g}%, EHRSQL {best.accuracy.ehrsql:g}%) and was trained on large real-world "
        f"schemas (median {best.training.median_tables:g} tables).",
    ]
    suggested = suggested_entry(table_count)
    if table_count is not None:
        if suggested is not default:
            lines.append(
                f"Suggested for the open database ({table_count} tables, {LARGE_SCHEMA_TABLES}+): "
                f"{suggested.name}."
            )
        else:
            lines.append(
                f"The open database has {table_count} tables (under {LARGE_SCHEMA_TABLES}): the default fits."
            )
    return "\n".join(lines)


def conversion_estimate(cores: int) -> str:
    """What converting a checkpoint on this computer costs, in a sentence (sizes from the cards,
    times from ENGINE-NOTES' measurements, scaled by core count)."""
    # Quantizing was measured; writing the F16 file and the generation check are taken as about
    # as long again each (an estimate, said as one).
    minutes = max(1, round(QUANTIZE_MINUTES_2_CORES * 2 / max(cores, 1) * 3))
    return (
        f"Converting downloads the {CHECKPOINT_DOWNLOAD_GB:g} GB checkpoint, writes a GGUF and quantizes "
        f"it to about {GGUF_Q4_K_M_GB:g} GB: besides the download, an estimated {minutes} minute"
        f"{'' if minutes == 1 else 's'} on {cores} core{'' if cores == 1 else 's'}, with about "
        f"{CHECKPOINT_DOWNLOAD_GB * 2 + GGUF_Q4_K_M_GB:.0f} GB of free disk while it works."
    )
