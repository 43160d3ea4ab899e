"""While an answer streams, the objects that existed before it are frozen (``gc.freeze``), so a
full collection during the stream walks only what the stream made (``ui.collector_pause``): with
a large schema open a full walk stopped the chat for 110+ ms.  When the answer ends they are handed
back to the collector."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from sqale_desktop.ui import collector_pause
from tests.ui.replay_scripts import chinook_script
from tests.ui.windows import WindowFactory, ask, open_page


def test_what_existed_before_an_answer_is_frozen_while_it_streams_and_handed_back_after(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> None:
    window = make_window(chinook_script(thinking_words=200))
    page = open_page(qtbot, window, chinook)
    schema_like = [{"table": f"t{i}", "columns": [f"c{j}" for j in range(4)]} for i in range(20_000)]
    assert gc.get_freeze_count() == 0 and not collector_pause.holding()
    with qtbot.waitSignal(window.episode_finished, timeout=30_000):
        ask(qtbot, window, page)
        # Ask froze at once (the episode is running from here on): at least the objects above.
        assert collector_pause.holding()
        assert gc.get_freeze_count() >= len(schema_like) * 2
        gc.collect()
        # What a collection walks (the three generations) holds none of the frozen objects.  The
        # frozen count itself may fall: reference counting still frees frozen objects the
        # stream's threads let go of.
        walked = {id(obj) for obj in gc.get_objects()}
        assert not any(id(row) in walked or id(row["columns"]) in walked for row in schema_like)
        assert gc.get_freeze_count() >= len(schema_like) * 2
    assert not collector_pause.holding()
    assert gc.get_freeze_count() == 0  # back with the collector once the answer ended
    assert len(schema_like) == 20_000


def test_the_collector_is_paused_while_any_owner_streams() -> None:
    first, second = object(), object()
    collector_pause.hold(first)
    frozen = gc.get_freeze_count()
    assert frozen > 0
    made_after = [[] for _ in range(1000)]  # tracked after the first freeze
    collector_pause.hold(second)  # a second stream freezes nothing more
    walked = {id(obj) for obj in gc.get_objects()}
    assert all(id(item) in walked for item in made_after)
    collector_pause.release(first)
    assert collector_pause.holding() and 0 < gc.get_freeze_count() <= frozen
    collector_pause.release(first)  # released twice: no effect
    assert collector_pause.holding()
    collector_pause.release(second)
    assert not collector_pause.holding() and gc.get_freeze_count() == 0


def test_a_window_closed_while_it_streams_hands_the_objects_back(
    qtbot: Any, make_window: WindowFactory, chinook: Path
) -> None:
    window = make_window(chinook_script(thinking_words=5000))
    page = open_page(qtbot, window, chinook)
    ask(qtbot, window, page)
    assert collector_pause.holding()
    window.close()  # quitting mid-answer: the cancelled episode ends, the objects go back
    assert not collector_pause.holding()
    assert gc.get_freeze_count() == 0
