"""The catalog of SQaLe agents and the large-schema hint."""

from __future__ import annotations

from sqale_desktop.core.models import catalog


def test_three_agents_with_seed_figures_and_synsql_default() -> None:
    assert [e.repo_id for e in catalog.CATALOG] == [
        "trl-lab/qwen3.5-2b-grpo-synsql",
        "trl-lab/qwen3.5-2b-grpo-sqale",
        "trl-lab/qwen3.5-2b-grpo-bird",
    ]
    assert catalog.default_entry() is catalog.SYNSQL
    assert catalog.SQALE.accuracy.sqale_test == 66.3
    assert catalog.BIRD.accuracy.bird_dev == 54.7
    assert catalog.SYNSQL.accuracy.ehrsql == 13.3
    assert catalog.SQALE.training.median_tables == 113
    assert catalog.find("TRL-LAB/Qwen3.5-2B-GRPO-SQaLe") is catalog.SQALE
    assert catalog.find("someone/else") is None


def test_large_schema_hint_points_to_sqale() -> None:
    assert catalog.large_schema_hint(39) is None
    hint = catalog.large_schema_hint(40)
    assert hint is not None and "M_SQaLe" in hint and "40 tables" in hint
    assert catalog.large_schema_hint(367, current_checkpoint="trl-lab/qwen3.5-2b-grpo-synsql") is not None
    assert catalog.large_schema_hint(367, current_checkpoint="trl-lab/qwen3.5-2b-grpo-sqale") is None
