"""The import cache is bounded (issue 32 item 7): one session left 760 MB and nothing evicted.

Past the ``import_cache_limit_mb`` setting the imports used least recently go first; the one being
imported and any that is open (in this process or another) stay; Settings' Clear removes what is
not open.  Real imports through ``import_source``, real open handles through ``open_readonly``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from sqale_desktop.core import settings as settings_mod
from sqale_desktop.core.db import open_readonly
from sqale_desktop.core.imports import cache_bound, import_source
from tests.helpers import readline_within

MB = 1024 * 1024


def _csv(path: Path, megabytes: float) -> Path:
    """A CSV of about ``megabytes`` (its import is about as large)."""
    line = "id,name,notes\n"
    rows = int(megabytes * MB / 60)
    path.write_text(line + "".join(f"{i},name {i},{'x' * 40}\n" for i in range(rows)), encoding="utf-8")
    return path


def _limit(mb: int) -> None:
    settings = settings_mod.load().settings
    settings.import_cache_limit_mb = mb
    settings_mod.save(settings)


def _age(folder: Path, seconds_ago: float) -> None:
    stamp = folder / cache_bound.STAMP
    when = time.time() - seconds_ago
    os.utime(stamp, (when, when))


def test_least_recently_used_imports_go_past_the_bound(tmp_path: Path) -> None:
    _limit(64)
    first = import_source(_csv(tmp_path / "a.csv", 30))
    second = import_source(_csv(tmp_path / "b.csv", 30))
    _age(first.db_path.parent, 300)  # a was used before b
    _age(second.db_path.parent, 200)
    third = import_source(_csv(tmp_path / "c.csv", 30))
    # a, b and c are ~90 MB together, over 64 MB: a goes (used least recently), b stays.
    assert not first.db_path.exists()
    assert second.db_path.exists() and third.db_path.exists()
    again = import_source(tmp_path / "a.csv")  # made again when opened
    assert again.db_path.exists() and not again.reused
    assert third.db_path.exists()


def test_an_open_import_is_never_removed(tmp_path: Path) -> None:
    _limit(64)
    first = import_source(_csv(tmp_path / "a.csv", 40))
    _age(first.db_path.parent, 300)
    with open_readonly(first.db_path) as db:
        second = import_source(_csv(tmp_path / "b.csv", 40))
        assert first.db_path.exists()  # open: kept although used least recently
        assert db.execute("SELECT count(*) FROM a").rows[0][0] > 0
        assert second.db_path.exists()
    _age(first.db_path.parent, 300)
    import_source(_csv(tmp_path / "c.csv", 1))
    assert not first.db_path.exists()  # closed: now it goes


def test_open_in_another_process_counts_as_open(tmp_path: Path) -> None:
    first = import_source(_csv(tmp_path / "a.csv", 1))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from sqale_desktop.core.imports import cache_bound; "
            "h = cache_bound.hold(Path(sys.argv[1])); print(h is not None, flush=True); sys.stdin.read()",
            str(first.db_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert readline_within(holder.stdout).strip() == "True"
        state = cache_bound.clear()
        assert first.db_path.exists()
        assert state.kept_open == 1
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    state = cache_bound.clear()
    assert not first.db_path.exists()
    assert state.removed == 1 and state.imports == 0


def test_size_and_clear_report_what_the_cache_holds(tmp_path: Path) -> None:
    assert cache_bound.cache_size().imports == 0
    first = import_source(_csv(tmp_path / "a.csv", 2))
    import_source(_csv(tmp_path / "b.csv", 2))
    size = cache_bound.cache_size()
    assert size.imports == 2
    assert size.bytes >= first.db_path.stat().st_size
    cleared = cache_bound.clear()
    assert cleared.removed == 2 and cleared.freed == size.bytes and cleared.bytes == 0
    assert cache_bound.cache_size() == cache_bound.CacheState(0, 0)
