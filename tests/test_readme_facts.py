"""Facts the README states that the code decides: the system packages of the window and where the
demo database is.  A change to either makes the README stale, and this fails until it follows."""

from __future__ import annotations

import re
from pathlib import Path

import platformdirs
import pytest

from sqale_desktop.core import paths
from sqale_desktop.core.demo import default_demo_path
from tests.helpers import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _words(text: str) -> set[str]:
    return set(re.split(r"[\s`]+", text))


@pytest.mark.parametrize("column", range(3))
def test_the_readme_names_every_package_the_xcb_check_names(column: int) -> None:
    from sqale_desktop.ui.xcb_check import DISTRIBUTIONS, INSTALL, PACKAGES

    distribution = DISTRIBUTIONS[column]
    wanted = {packages[column] for packages in PACKAGES.values()}
    cursor = PACKAGES["libxcb-cursor.so.0"][column]
    line = next(p for p in README.split("- **") if f"{INSTALL[distribution]} {cursor}" in " ".join(p.split()))
    assert wanted <= _words(line), wanted - _words(line)


def test_the_readme_says_where_the_demo_database_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path))
    assert default_demo_path() == tmp_path / "data" / "demo" / "shop.sqlite"
    assert "`$SQALE_DESKTOP_HOME/data/demo/shop.sqlite`" in README
    monkeypatch.delenv(paths.HOME_ENV)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    linux = platformdirs.unix.Unix(paths.APP_NAME, appauthor=False).user_data_dir
    assert Path(linux) == Path.home() / ".local/share/sqale-desktop"
    assert "`~/.local/share/sqale-desktop/demo/shop.sqlite`" in README
    assert "ask --db ~/.local/share/sqale-desktop/demo/shop.sqlite" in README
