"""The model's one long-lived worker thread, and the UI-side handle that talks to it.

The engine (llama.cpp is not thread-safe) is built on the worker thread on first use and only ever
touched there (Spyder's actor pattern).  Episodes run there too, with the tool database opened on
that thread.  Stop does not travel through the worker's event loop, which is busy generating: the
UI thread sets the episode's ``threading.Event``, the one cancel path of the package (the engine
stops between tokens, the loop's query watcher interrupts a running query).

Events do not cross threads one signal each: at full speed the model yields hundreds of text
deltas a second, and a queued signal per delta would flood the UI's event loop.  The worker
appends events to a deque, each in an :class:`EventItem` envelope that names its episode; the
runner drains it on a timer (every ``DRAIN_INTERVAL_MS``), merges consecutive text deltas and hands
the items to the window's ``apply`` callback at most ``DRAIN_BUDGET_S`` of work at a time, so the
UI does a bounded amount of work per frame however fast the model runs.  All of that timing lives
here, in :meth:`AgentRunner.deliver_to`.

The worker keeps one :class:`~sqale_desktop.core.runtime.Runtime`, the same that ``ask`` and
``eval run`` use: its engine factory, its episode function, its tool-database opener (with the
settings' query time limit) and its warm-up.  When the settings change the window hands it a new
one (:meth:`AgentRunner.set_runtime`); the tool databases are opened again by the new runtime
before their next episode, and the loaded model stays only when the change does not concern it.

Warm-up: right after the engine loads, the worker has the runtime evaluate the system turn its
episodes start with (``Runtime.warm_up``; restored from the disk cache when an earlier launch
saved it), so the first question evaluates only its own turn.  It runs on the worker thread like
any other job, so a question asked meanwhile queues behind it in the worker's event loop and then
finds the turn ready; Stop, a new engine and shutdown cancel it between prefill chunks.

Prefetch: when the composer starts following up an answer, the worker has the runtime evaluate
the thread and the fixed start of the follow-up's turn (``Runtime.prefetch_follow_up``) while the
person types, as a job like the warm-up; Enter then evaluates only the question.  It changes
nothing that is generated.  A question on another thread or none, Stop, a new engine and shutdown
cancel it (within a prefill chunk); a follow-up on the same thread queues behind it, since what it
evaluates is the follow-up's own start.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from sqale_desktop.core.agent.events import Event, TextDelta
from sqale_desktop.core.errors import is_known
from sqale_desktop.core.runtime import LOAD_PROGRESS, Engine, NoModelInstalled, Runtime, Thread, close_engine
from sqale_desktop.ui.stream_merge import merge_deltas
from sqale_desktop.ui.workers import register_thread_owner

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EventItem:
    """An agent event on its way from the worker to the UI, with the episode it belongs to."""

    episode_id: int
    event: Event


@dataclass(frozen=True)
class EpisodeFailed:
    """Not an agent event: the worker's own report that an episode could not run at all."""

    episode_id: int
    error: BaseException


@dataclass(frozen=True)
class EpisodeDone:
    """Not an agent event: the worker finished with an episode, whatever happened."""

    episode_id: int


Item = EventItem | EpisodeFailed | EpisodeDone
ItemSink = Callable[[list[Item]], None]

# The UI applies what arrived at most every 40 ms, and about 8 ms of it per turn of the event
# loop (building a card costs ~15 ms, so input, timers and painting get in between).  The cost of
# the next card-building item is guessed from the last ones: the most recent, or the earlier
# guess halved (an expensive card raises the guess at once, cheap items lower it gradually).
DRAIN_BUDGET_S = 0.008
COST_DECAY = 0.5
DRAIN_INTERVAL_MS = 40

# A worker busy in pure Python keeps the GIL for Python's whole switch interval (5 ms) each time
# the UI thread asks for it, and the UI thread asks once per Qt call; so the worker gives the
# GIL away on its own, 1 ms in every 4, and the UI's calls go through without waiting.
GIL_SLICE_S = 0.004
GIL_YIELD_S = 0.001


class AgentWorker(QObject):
    """Lives on the agent thread: owns the engine and the tool databases opened there.

    Signals:
        engine_state(str, str): ("loading" | "ready" | "failed", description or message); while
            the system turn is warmed after loading, ("loading", "Preparing the model…").
        load_progress(int): loading progress in thousandths, when the engine reports it.
        items_ready(): new items were queued (emitted at most once until the UI drains).
    """

    engine_state = Signal(str, str)
    load_progress = Signal(int)
    items_ready = Signal()

    def __init__(self, runtime: Runtime) -> None:
        super().__init__()
        self._runtime = runtime
        self._engine: Engine | None = None
        # Each tool database with the runtime that opened it: another runtime opens it again.
        self._databases: dict[Path, tuple[Runtime, Any]] = {}
        self._lock = threading.Lock()
        self._cancel: threading.Event | None = None
        self._queue: collections.deque[Item] = collections.deque()
        self._notified = False
        self._cancel_upto = 0
        # Set to stop a running warm-up (Stop, another engine, shutdown); a fresh one per warm-up.
        self._warm_cancel = threading.Event()
        # The follow-up being prefetched (or queued to be) and its cancel flag; None when none is.
        self._prefetch: tuple[Thread, threading.Event] | None = None
        # Set while the UI is not applying events.  A model streaming at full speed in pure Python
        # (the replay engine, a fast server) holds the GIL for 5 ms at a time, and every Qt call
        # the UI thread makes releases and re-takes the GIL, so a drain of a few dozen calls
        # could take hundreds of milliseconds.  The worker pauses between events while the UI
        # drains (a real model's decode releases the GIL anyway), so the UI always comes first.
        self.ui_idle = threading.Event()
        self.ui_idle.set()

    # called from the UI thread ------------------------------------------------------------
    def cancel(self, upto_episode: int) -> None:
        """Stop episodes up to this id now: generation between tokens, a query mid-step.

        An episode still queued behind the worker's event loop is cancelled before it starts.
        """
        with self._lock:
            self._cancel_upto = max(self._cancel_upto, upto_episode)
            cancel = self._cancel
            self._warm_cancel.set()  # a warm-up under way: what the model does now stops too
            self._cancel_prefetch_locked(None)
        if cancel is not None:
            cancel.set()  # the loop interrupts a running query itself (core.agent.loop)

    def expect_prefetch(self, thread: Thread | None) -> threading.Event | None:
        """A prefetch of ``thread`` is about to be queued (None: no follow-up now): any other one
        stops; the new one's cancel flag."""
        with self._lock:
            self._cancel_prefetch_locked(None)
            if thread is None:
                return None
            cancel = threading.Event()
            self._prefetch = (thread, cancel)
            return cancel

    def cancel_prefetch(self, unless: Thread | None) -> None:
        """Stop the prefetch unless it is of ``unless``'s thread (a follow-up on it waits for it)."""
        with self._lock:
            self._cancel_prefetch_locked(unless)

    def _cancel_prefetch_locked(self, unless: Thread | None) -> None:
        prefetch = self._prefetch
        if prefetch is None or (unless is not None and prefetch[0].prompt == unless.prompt):
            return
        prefetch[1].set()
        self._prefetch = None

    def drain(self) -> list[Item]:
        items: list[Item] = []
        with self._lock:
            while self._queue:
                items.append(self._queue.popleft())
            self._notified = False
        return merge_deltas(items)

    @property
    def runtime(self) -> Runtime:
        with self._lock:
            return self._runtime

    @property
    def engine(self) -> Engine | None:
        """The engine loaded now; None before the first load and after a runtime change that
        concerns it.  The worker's thread owns it: look at it, never run it from another thread."""
        return self._engine

    def set_runtime(self, runtime: Runtime, keep_engine: bool = False) -> None:
        """Run later episodes with ``runtime`` (the settings changed); each tool database is opened
        again by it before its next episode, so its query time limit applies.

        ``keep_engine``: the change does not concern the engine (sampling, limits, rows), and the
        loaded model stays.  Otherwise the engine is dropped here and rebuilt from the runtime's
        factory before the next episode; it is freed by the garbage collector, on whichever thread
        holds the last reference, which is safe because it is no longer used.
        """
        with self._lock:
            self._runtime = runtime
            if not keep_engine:
                self._engine = None
                self._warm_cancel.set()  # warming the old engine is no use now
                self._cancel_prefetch_locked(None)

    # run on the worker thread ---------------------------------------------------------------
    def _push(self, item: Item) -> None:
        with self._lock:
            self._queue.append(item)
            notify = not self._notified
            self._notified = True
        if notify:
            self.items_ready.emit()

    @Slot()
    def load_engine(self) -> None:
        try:
            self._ensure_engine()
        except BaseException:  # reported through engine_state; nothing dies silently
            return

    def _ensure_engine(self) -> Engine:
        with self._lock:
            engine, runtime = self._engine, self._runtime
        if engine is not None:
            return engine
        factory = runtime.factory
        if factory is None:
            self.engine_state.emit("failed", "No model is installed: open the model manager to download one.")
            raise NoModelInstalled("no model installed")
        self.engine_state.emit("loading", "Loading the model…")
        last = [-1]

        def report(fraction: float) -> None:
            value = int(1000 * min(max(fraction, 0.0), 1.0))
            if value != last[0]:  # a queued signal per change, not per call
                last[0] = value
                self.load_progress.emit(value)

        token = LOAD_PROGRESS.set(report)
        try:
            engine = factory()
        except BaseException as exc:
            log.warning("engine failed to load: %s", exc)
            self.engine_state.emit("failed", str(exc) or type(exc).__name__)
            raise
        finally:
            LOAD_PROGRESS.reset(token)
        with self._lock:
            self._engine = engine
        self._warm_up(runtime, engine)
        self.engine_state.emit("ready", engine.describe())
        return engine

    def _warm_up(self, runtime: Runtime, engine: Engine) -> None:
        """Have ``runtime`` evaluate (or restore) its system turn on ``engine``; never raises.

        A failure here is no failure of the engine: the first episode evaluates the turn itself
        (``Runtime.warm_up`` logs a known condition; anything else is a bug, logged here).
        """
        if not runtime.warms(engine):
            return
        with self._lock:
            self._warm_cancel = cancel = threading.Event()
        self.engine_state.emit("loading", "Preparing the model…")
        try:
            result = runtime.warm_up(engine, cancel)
        except Exception:
            log.exception("system-turn warm-up failed")
            return
        if result is not None:
            log.info("%s", result.note or "system turn warmed")

    @Slot(object, object)
    def prefetch_follow_up(self, thread: Thread, cancel: threading.Event) -> None:
        """Have the loaded model evaluate what a follow-up to ``thread`` starts with; never raises
        (the follow-up evaluates it itself).  Nothing is loaded for it."""
        with self._lock:
            engine, runtime = self._engine, self._runtime
        try:
            if engine is None or cancel.is_set():
                return
            started = time.perf_counter()
            tokens = runtime.prefetch_follow_up(engine, thread, cancel)
            log.info(
                "follow-up prefetched: %d tokens in %.2f s%s",
                tokens,
                time.perf_counter() - started,
                " (cancelled)" if cancel.is_set() else "",
            )
        except Exception as exc:
            if is_known(exc):
                log.info("follow-up prefetch skipped: %s", exc)
            else:
                log.exception("follow-up prefetch failed")
        finally:
            with self._lock:
                if self._prefetch is not None and self._prefetch[1] is cancel:
                    self._prefetch = None

    @Slot(int, str, str, object, object)
    def run_episode(
        self,
        episode_id: int,
        question: str,
        db_path: str,
        runtime: Runtime | None,
        parent: Thread | None = None,
    ) -> None:
        """Run one episode on the model, or, with ``runtime``, on that runtime's own engine
        (built here for this episode and closed after it; the model stays as it is).  The tool
        database is the worker's either way, opened by the runtime the worker keeps.

        ``parent``: the thread this question follows up (``core.agent.followup``); the model
        still holds it when nothing ran since, so only the new turn is evaluated.
        """
        cancel = threading.Event()
        own: Engine | None = None
        try:
            if runtime is not None:
                if runtime.factory is None:
                    raise NoModelInstalled(runtime.description)
                engine = own = runtime.factory()
                episode_fn = runtime.episode
            else:
                engine = self._ensure_engine()
                with self._lock:
                    episode_fn = self._runtime.episode
            db = self._database(Path(db_path))
            with self._lock:
                self._cancel = cancel
                if episode_id <= self._cancel_upto:
                    cancel.set()
            last_yield = time.perf_counter()
            events = (
                episode_fn(engine, db, question, cancel)
                if parent is None
                else episode_fn(engine, db, question, cancel, parent=parent)
            )
            for event in events:
                self._push(EventItem(episode_id, event))
                self.ui_idle.wait(0.25)
                if time.perf_counter() - last_yield > GIL_SLICE_S:
                    time.sleep(GIL_YIELD_S)  # let the UI thread take the GIL between its Qt calls
                    last_yield = time.perf_counter()
        except BaseException as exc:  # every worker catches everything and reports it
            if is_known(exc):
                log.info("episode could not run: %s", exc)  # the message says it all
            else:
                log.exception("episode failed")
            self._push(EpisodeFailed(episode_id, exc))
        finally:
            with self._lock:
                self._cancel = None
            if own is not None:
                close_engine(own)
            self._push(EpisodeDone(episode_id))

    def _database(self, path: Path) -> Any:
        """The tool database of ``path``, opened by the runtime in force (on this thread)."""
        with self._lock:
            runtime = self._runtime
        opened = self._databases.get(path)
        if opened is not None and opened[0] is runtime:
            return opened[1]
        if opened is not None:  # opened under other settings: its time limit is the old one
            del self._databases[path]
            _close_database(opened[1])
        db = runtime.open_database(path)
        self._databases[path] = (runtime, db)
        return db

    @Slot()
    def close(self) -> None:
        """Close the databases and drop the engine, on the thread that owns them."""
        self._warm_cancel.set()
        self.cancel_prefetch(None)
        for _runtime, db in self._databases.values():
            _close_database(db)
        self._databases.clear()
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            close_engine(engine)


def _close_database(db: Any) -> None:
    try:
        db.close()
    except Exception:
        log.debug("closing a tool database failed", exc_info=True)


class AgentRunner(QObject):
    """UI-side handle of the agent thread.

    Signals:
        items_ready(): the worker queued items; call ``drain()``.
        engine_state(str, str): forwarded from the worker.
        load_progress(int): forwarded from the worker (thousandths).
        _run(int, str, str, object, object): internal, queued to the worker's ``run_episode``.
        _load(): internal, queued to the worker's ``load_engine``.
        _prefetch(object, object): internal, queued to the worker's ``prefetch_follow_up``.
    """

    items_ready = Signal()
    engine_state = Signal(str, str)
    load_progress = Signal(int)
    _run = Signal(int, str, str, object, object)
    _load = Signal()
    _prefetch = Signal(object, object)

    def __init__(self, runtime: Runtime, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread = QThread()
        self._thread.setObjectName("agent")
        self.worker = AgentWorker(runtime)
        self.worker.moveToThread(self._thread)
        self._run.connect(self.worker.run_episode)
        self._load.connect(self.worker.load_engine)
        self._prefetch.connect(self.worker.prefetch_follow_up)
        self.worker.items_ready.connect(self.items_ready)
        self.worker.engine_state.connect(self.engine_state)
        self.worker.load_progress.connect(self.load_progress)
        self._next_id = 0
        self._sink: ItemSink | None = None
        self._pending: collections.deque[Item] = collections.deque()
        self._item_cost = 0.0  # the guessed cost of handing on the next non-delta item (seconds)
        self._drain_timer = QTimer(self)
        self._drain_timer.setSingleShot(True)
        self._drain_timer.setInterval(DRAIN_INTERVAL_MS)
        self._drain_timer.timeout.connect(self._deliver)
        # What did not fit goes on through a zero timer, not a posted call (Qt 6 posts a zero
        # QTimer.singleShot): timers run in the order they fell due, so a timer that is already
        # due (an animation, the blinking cursor) runs before the next batch, not after it.
        self._continue_timer = QTimer(self)
        self._continue_timer.setSingleShot(True)
        self._continue_timer.setInterval(0)
        self._continue_timer.timeout.connect(self._deliver)
        self._thread.start()
        register_thread_owner(self)

    def deliver_to(self, sink: ItemSink) -> None:
        """Hand drained items to ``sink`` on a timer, within the drain budget (the window's way);
        without a sink, callers pull with :meth:`drain` (tests)."""
        self._sink = sink
        self.items_ready.connect(self._schedule_delivery)

    def _schedule_delivery(self) -> None:
        if not self._drain_timer.isActive():
            self._drain_timer.start()

    def _deliver(self) -> None:
        """Give the sink what the agent thread produced, about ``DRAIN_BUDGET_S`` of work per call.

        The worker waits meanwhile.  Text deltas are handed on in runs; anything else is handed on
        at once, since it may build a card (~15 ms).  Before such an item the runner guesses its
        cost from the last ones: when it would not fit in what is left of the budget, the rest
        waits for the next turn of the event loop, so that timers, input and the layouts and paints
        of what was just built get in between (a tool card and the next turn built in one go
        stalled the loop for 40 ms; issue 32).  Each call hands on at least one item, in order.
        """
        sink = self._sink
        if sink is None or not self.is_busy():
            return
        self.pause_worker()
        try:
            self._pending.extend(self.drain())
            deadline = time.perf_counter() + DRAIN_BUDGET_S
            batch: list[Item] = []
            handed = False
            while self._pending:
                item = self._pending[0]
                if isinstance(item, EventItem) and isinstance(item.event, TextDelta):
                    batch.append(self._pending.popleft())
                    continue
                began = time.perf_counter()
                if (handed or batch) and began + self._item_cost > deadline:
                    break
                batch.append(self._pending.popleft())
                sink(batch)
                batch = []
                handed = True
                cost = time.perf_counter() - began
                self._item_cost = max(cost, self._item_cost * COST_DECAY)
            if batch:
                sink(batch)
            if self._pending:
                self._continue_timer.start()
        finally:
            # Resume only after the layout and paint events the drain posted have run: painting
            # calls back into Python (models, highlighters) and should not queue behind the worker.
            QTimer.singleShot(0, self.resume_worker)

    def deliver_rest(self) -> None:
        """After :meth:`shutdown`: hand the sink everything left (a cancelled episode's last
        events, its EpisodeEnded included, go to the history like any other)."""
        self._pending.extend(self.drain())
        items, self._pending = list(self._pending), collections.deque()
        if self._sink is not None and items:
            self._sink(items)

    def ask(
        self, question: str, db_path: Path, runtime: Runtime | None = None, parent: Thread | None = None
    ) -> int:
        """Queue an episode; returns its id (items carry it).

        ``runtime``: another engine choice for this one episode (``core.runtime.resolve``, e.g.
        the recording); the loaded model stays loaded.  ``parent``: the thread of a follow-up.
        """
        self.worker.cancel_prefetch(parent if runtime is None else None)
        self._next_id += 1
        self._run.emit(self._next_id, question, str(db_path), runtime, parent)
        return self._next_id

    def load_engine(self) -> None:
        self._load.emit()

    def prefetch_follow_up(self, thread: Thread | None) -> None:
        """The composer follows up ``thread`` now (None: no follow-up): the model starts on it
        while the question is typed (``AgentWorker.prefetch_follow_up``); any other prefetch stops."""
        cancel = self.worker.expect_prefetch(thread)
        if thread is not None and cancel is not None:
            self._prefetch.emit(thread, cancel)

    @property
    def runtime(self) -> Runtime:
        """The runtime the agent thread runs episodes with (the window's engine, prompt, limits)."""
        return self.worker.runtime

    def set_runtime(self, runtime: Runtime, keep_engine: bool = False) -> None:
        """Hand the agent thread a new runtime (``AgentWorker.set_runtime``)."""
        self.worker.set_runtime(runtime, keep_engine)

    def stop(self) -> None:
        self.worker.cancel(self._next_id)

    def pause_worker(self) -> None:
        """The UI is about to apply events: the worker waits between events until ``resume_worker``."""
        self.worker.ui_idle.clear()

    def resume_worker(self) -> None:
        self.worker.ui_idle.set()

    def drain(self) -> list[Item]:
        return self.worker.drain()

    def is_busy(self) -> bool:
        """The agent thread still runs (until :meth:`shutdown`); whether an episode runs is the
        episode controller's ``busy``."""
        return shiboken6.isValid(self._thread) and self._thread.isRunning()

    def shutdown(self, timeout_ms: int = 15_000) -> bool:
        """Cancel the episode, close what the worker owns on its thread, stop and join the thread."""
        self._drain_timer.stop()
        self._continue_timer.stop()
        if not self.is_busy():
            return True
        self.worker.cancel(self._next_id)
        self.worker.ui_idle.set()
        self._thread.quit()
        stopped = bool(self._thread.wait(timeout_ms))
        if stopped:
            # The thread has ended, so what it owned can be closed from here; a queued close
            # would never run, because quit() ends the loop before its pending events.
            self.worker.close()
        return stopped
