"""Closing the window while a large CSV imports on the fast path: the app exits cleanly and quietly.

The import runs pyarrow's reader and the ADBC writer in threads of their own; closing cancels the
pool's jobs and waits for them, and the import joins its threads before it returns, so nothing of
Arrow's is running when the interpreter exits (a thread left running there crashes it).  The app
is ``run_app`` in a child process, given the file as a person does on the command line.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.e2e.child_app import run_app_script, terminal_noise
from tests.helpers import fingerprint

SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from PySide6.QtCore import QTimer
    from sqale_desktop.core.paths import cache_dir
    from sqale_desktop.ui.app import create_application, run_app
    from sqale_desktop.ui.main_window import MainWindow

    app = create_application(["sqale-desktop"])

    def close_while_importing():
        building = list((cache_dir() / "imports").glob("*/.building/*.sqlite"))
        shown = [w for w in app.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
        if building and shown:
            print("closing while importing", flush=True)
            shown[0].close()  # what the window's close button does
        else:
            QTimer.singleShot(5, close_while_importing)

    QTimer.singleShot(0, close_while_importing)
    sys.exit(run_app(files=[Path(sys.argv[1])]))
    """
)


def test_closing_while_a_large_csv_imports_is_clean(tmp_path: Path) -> None:
    source = tmp_path / "sales.csv"
    with open(source, "w", encoding="utf-8", newline="") as handle:
        handle.write("id,customer,amount\n")
        block = "".join(f"{i},customer {i % 977},{i / 100}\n" for i in range(100_000))
        for _ in range(12):  # about 35 MB: seconds of importing
            handle.write(block)
    before = fingerprint(source)
    home = tmp_path / "home"
    done = run_app_script(SCRIPT, str(source), home=home)
    assert done.returncode == 0, done.stderr
    assert "closing while importing" in done.stdout
    assert terminal_noise(done) == []
    assert [p for p in (home / "cache" / "imports").rglob("*") if p.is_file()] == []
    assert fingerprint(source) == before
