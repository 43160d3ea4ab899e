"""The evaluated system turn saved on disk (``prefix_store``) and the engine's ``warm_up`` over it.

A second launch is a second process here: it finds the state the first one saved, restores it
instead of evaluating the system turn, and then generates exactly what an engine without any
cache generates.  A state saved for other model bytes, a damaged file and the store's bounds are
checked too.  Every test has its own app home (``isolated_home``), so its own cache folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from sqale_desktop.core import file_hash
from sqale_desktop.core.engines.llama import prefix_store
from sqale_desktop.core.engines.llama.engine import LlamaEngine
from sqale_desktop.core.engines.llama.prefix_store import PrefixStore, state_key
from sqale_desktop.core.engines.synthetic_gguf import TINY_SHAPE, write_qwen35_gguf
from tests.core.engines.llama_helpers import GREEDY, run, user_turn

SYSTEM_TEXT = "<|im_start|>system\n" + "Call one tool per line, then submit the SQL. " * 8 + "<|im_end|>\n"
QUESTION = user_turn("How many tracks are there?")

# One launch: load, optionally warm the system turn, answer one turn greedily; print what happened.
LAUNCH = """
import json, sys, threading
from sqale_desktop.core.engines.base import SamplingParams
from sqale_desktop.core.engines.llama.engine import LlamaEngine

path, warm, system, question = sys.argv[1], sys.argv[2] == "warm", sys.argv[3], sys.argv[4]
engine = LlamaEngine(path, n_ctx=2048, n_batch=64, n_ubatch=64, n_threads=1)
engine.load()
result = engine.warm_up(system, threading.Event()) if warm else None
session = engine.new_session(system + question)
greedy = SamplingParams(temperature=0.0, top_k=1, top_p=1.0, seed=0)
text = "".join(session.generate(12, greedy, threading.Event()))
session.end_turn()
session.append(question)
sampled = "".join(session.generate(12, SamplingParams(temperature=1.0, seed=7), threading.Event()))
print(json.dumps({
    "turn": len(engine.system_turn(system)),
    "restored": bool(result and result.restored),
    "warm_evaluated": result.evaluated if result else 0,
    "evaluated_first": session.stats.evaluated_tokens,
    "history_first": len(session.history),
    "reused": session.reused_tokens,
    "text": text,
    "sampled": sampled,
}))
engine.close()
"""


def launch(model: Path, *, warm: bool, cache: bool = True) -> dict[str, Any]:
    """A separate process, as a second start of the app is: its answer to one question."""
    env = dict(os.environ)
    env.pop(prefix_store.DISABLE_ENV, None)
    if not cache:
        env[prefix_store.DISABLE_ENV] = "1"
    done = subprocess.run(
        [sys.executable, "-c", LAUNCH, str(model), "warm" if warm else "plain", SYSTEM_TEXT, QUESTION],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def engine_on(path: Path, model_sha256: str = "") -> LlamaEngine:
    engine = LlamaEngine(path, n_ctx=2048, n_batch=64, n_ubatch=64, n_threads=1, model_sha256=model_sha256)
    engine.load()
    return engine


@pytest.fixture(params=["smollm2", "qwen35-tiny"])
def model(request: pytest.FixtureRequest, tiny_path: Path, smollm2_path: Path) -> Path:
    return smollm2_path if request.param == "smollm2" else tiny_path


def test_the_system_turn_ids_begin_every_episode_prompt(model: Path) -> None:
    engine = engine_on(model)
    try:
        turn = engine.system_turn(SYSTEM_TEXT)
        prompt = engine.new_session(SYSTEM_TEXT + QUESTION).history
        assert turn == prompt[: len(turn)]
        assert turn[-1] == engine.vocabulary.im_end and turn.count(engine.vocabulary.im_end) == 1
    finally:
        engine.close()


def test_a_second_launch_restores_the_system_turn_and_answers_the_same(model: Path) -> None:
    cold = launch(model, warm=False, cache=False)
    first = launch(model, warm=True)
    second = launch(model, warm=True)
    turn = cold["turn"]
    assert turn >= 32
    # No cache: every prompt token but the last (evaluated by the first decode step) is prefilled.
    assert cold["evaluated_first"] == cold["history_first"] - 1 and cold["reused"] == 0
    # The first launch evaluates the turn while warming up, then saves it.
    assert not first["restored"] and first["warm_evaluated"] == turn
    # The second restores it: nothing of the system turn is evaluated in that process.
    assert second["restored"] and second["warm_evaluated"] == 0
    for warmed in (first, second):
        assert warmed["evaluated_first"] == cold["evaluated_first"] - turn
        assert warmed["reused"] == turn
        assert (warmed["text"], warmed["sampled"]) == (cold["text"], cold["sampled"])
    assert len(PrefixStore().entries()) == 1


@pytest.mark.parametrize("registered", [False, True], ids=["unregistered", "registered"])
def test_a_changed_model_file_refuses_the_stored_state(
    tmp_path: Path, tiny_path: Path, registered: bool
) -> None:
    """Other weights at the same path, of the same size and with the old mtime put back: the
    state saved for the old bytes is not restored, also when the runtime still hands the engine
    the registry's hash of the old file (the registry compares only size and mtime)."""
    path = tmp_path / "model.gguf"
    shutil.copyfile(tiny_path, path)
    registry_hash = file_hash.sha256_file(path) if registered else ""
    engine = engine_on(path, registry_hash)
    assert not engine.warm_up(SYSTEM_TEXT, threading.Event()).restored
    engine.close()
    before = path.stat()
    # Other weights at the same path (same size, the same tokenizer, so the same token ids).
    write_qwen35_gguf(path, TINY_SHAPE, seed=4)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert file_hash.sha256_file(path) != registry_hash
    changed = engine_on(path, registry_hash)
    try:
        warmed = changed.warm_up(SYSTEM_TEXT, threading.Event())
        assert not warmed.restored and warmed.evaluated == warmed.tokens
        session = changed.new_session(SYSTEM_TEXT + QUESTION)
        text = run(session, 8, GREEDY)
        assert session.reused_tokens == warmed.tokens
    finally:
        changed.close()
    reference = LlamaEngine(path, n_ctx=2048, n_batch=64, n_ubatch=64, n_threads=1)
    try:
        assert run(reference.new_session(SYSTEM_TEXT + QUESTION), 8, GREEDY) == text
    finally:
        reference.close()
    assert len(PrefixStore().entries()) == 2  # one state per model content; the old one is never used


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "garbage"])
def test_a_damaged_state_file_is_deleted_noted_and_the_turn_evaluated(tiny_path: Path, damage: str) -> None:
    engine = engine_on(tiny_path)
    try:
        turn = engine.warm_up(SYSTEM_TEXT, threading.Event()).tokens
    finally:
        engine.close()
    [saved] = PrefixStore().entries()
    data = saved.read_bytes()
    if damage == "truncated":
        saved.write_bytes(data[: len(data) // 2])
    elif damage == "flipped byte":
        saved.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    else:
        saved.write_bytes(b"not a state at all")
    again = engine_on(tiny_path)
    try:
        warmed = again.warm_up(SYSTEM_TEXT, threading.Event())
        assert not warmed.restored and warmed.evaluated == turn
        note = next(n for n in again.notes if "saved system-turn state" in n)
        assert saved.name in note and "deleted" in note
        assert {"truncated": "truncated", "flipped byte": "checksum", "garbage": "truncated"}[damage] in note
    finally:
        again.close()
    # The damaged file was replaced by a good one: the next launch restores it.
    third = engine_on(tiny_path)
    try:
        assert third.warm_up(SYSTEM_TEXT, threading.Event()).restored
    finally:
        third.close()


def test_the_cache_can_be_turned_off(tiny_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(prefix_store.DISABLE_ENV, "1")
    for _ in range(2):
        engine = engine_on(tiny_path)
        try:
            warmed = engine.warm_up(SYSTEM_TEXT, threading.Event())
            assert not warmed.restored and warmed.evaluated == warmed.tokens
        finally:
            engine.close()
    assert PrefixStore().entries() == []


def test_a_cancelled_warm_up_saves_nothing_and_the_episode_evaluates_the_rest(tiny_path: Path) -> None:
    engine = engine_on(tiny_path)
    try:
        cancel = threading.Event()
        cancel.set()
        warmed = engine.warm_up(SYSTEM_TEXT, cancel)
        assert not warmed.completed
        session = engine.new_session(SYSTEM_TEXT + QUESTION)
        run(session, 2, GREEDY)
        assert session.stats.evaluated_tokens + session.reused_tokens >= len(session.history) - 2
    finally:
        engine.close()
    assert PrefixStore().entries() == []


# -- the store on its own (no model) ---------------------------------------------------------------


def state(n: int, fill: int = 7) -> bytes:
    return bytes([fill]) * n


def test_a_state_is_restored_only_for_its_own_key_and_ids(tmp_path: Path) -> None:
    store = PrefixStore(tmp_path)
    key = state_key({"model_sha256": "a"}, [1, 2, 3])
    assert key != state_key({"model_sha256": "b"}, [1, 2, 3]) != state_key({"model_sha256": "a"}, [1, 2])
    path = store.save(key, [1, 2, 3], state(1000), {"model_sha256": "a"})
    assert path is not None
    loaded = store.load(key, [1, 2, 3])
    assert bytes(loaded.state) == state(1000) and not loaded.problem
    assert store.load(state_key({"model_sha256": "b"}, [1, 2, 3]), [1, 2, 3]).state is None
    # Ids that differ from those stored are refused even under the file's own name.
    refused = store.load(key, [1, 2, 4])
    assert refused.state is None and "other token ids" in refused.problem
    assert not path.exists()
    # A file moved under another key's name is refused too, and deleted.
    store.save(key, [1, 2, 3], state(1000), {})
    other = state_key({"model_sha256": "c"}, [1, 2, 3])
    os.replace(store.path_for(key), store.path_for(other))
    moved = store.load(other, [1, 2, 3])
    assert moved.state is None and "another model" in moved.problem
    assert store.entries() == []


def test_the_store_keeps_a_few_entries_least_recently_used_first_out(tmp_path: Path) -> None:
    store = PrefixStore(tmp_path, max_entries=3, max_bytes=10_000)
    keys = [state_key({"n": i}, [i]) for i in range(5)]
    for i, key in enumerate(keys[:3]):
        store.save(key, [i], state(100), {})
        os.utime(store.path_for(key), ns=(i * 10**9, i * 10**9))  # a clear order, whatever the clock
    assert store.load(keys[0], [0]).state is not None  # used again: now the most recent
    store.save(keys[3], [3], state(100), {})
    kept = {p.name for p in store.entries()}
    assert kept == {store.path_for(k).name for k in (keys[0], keys[2], keys[3])}
    # The byte cap: a big state pushes out older ones; one over the cap is never written.
    store.save(keys[4], [4], state(9_000), {})
    assert sum(p.stat().st_size for p in store.entries()) <= 10_000
    assert store.path_for(keys[4]) in store.entries()
    assert store.save(keys[1], [1], state(20_000), {}) is None
    assert not list(tmp_path.glob(".writing-*"))  # no temporary file left behind


def replace_keeping_size_and_mtime(path: Path, content: bytes) -> None:
    """``content`` moved over ``path`` (a new inode, as a copy renamed into place has), with
    ``path``'s mtime put back; the size must already match."""
    stamp = path.stat()
    assert len(content) == stamp.st_size
    other = path.with_name(path.name + ".new")
    other.write_bytes(content)
    os.utime(other, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    os.replace(other, path)
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stamp.st_size, stamp.st_mtime_ns)


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files ``file_hash.sha256_file`` reads, in order."""
    calls: list[Path] = []
    real = file_hash.sha256_file

    def counting(path: Path, *args: Any, **kwargs: Any) -> str:
        calls.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(file_hash, "sha256_file", counting)
    return calls


def test_the_model_hash_is_computed_once_per_file_version(tmp_path: Path, hashed: list[Path]) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"x" * 100)
    store = PrefixStore(tmp_path / "cache")
    first = store.model_digest(model)
    assert store.model_digest(model) == first and len(hashed) == 1
    model.write_bytes(b"GGUF" + b"y" * 100)
    os.utime(model, ns=(1, 1))
    assert store.model_digest(model) != first and len(hashed) == 2
    # Other bytes of the same size moved over it with the old mtime: another version, hashed again.
    replace_keeping_size_and_mtime(model, b"GGUF" + b"z" * 100)
    assert store.model_digest(model) == file_hash.sha256_file(model) and len(hashed) == 4


def test_the_registry_hash_spares_reading_the_file_until_the_file_changes(
    tmp_path: Path, hashed: list[Path]
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"x" * 100)
    store = PrefixStore(tmp_path / "cache")
    registered = "ab" * 32  # what the registry recorded; the store does not read the file for it
    assert store.model_digest(model, known=registered) == registered
    assert store.model_digest(model, known=registered) == registered and hashed == []
    # Replaced under the registry (same size, mtime put back): the registry's hash is stale now.
    replace_keeping_size_and_mtime(model, b"GGUF" + b"y" * 100)
    assert store.model_digest(model, known=registered) == file_hash.sha256_file(model) != registered
    assert len(hashed) == 2
