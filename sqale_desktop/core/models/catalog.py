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
