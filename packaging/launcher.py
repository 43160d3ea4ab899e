"""PyInstaller's entry script: the frozen ``sqale-desktop`` binary runs the same ``main`` as the
``sqale-desktop`` console script and ``python -m sqale_desktop`` (window, subcommands and the
converter's hidden ``--child-module`` children alike)."""

from sqale_desktop.cli import main

raise SystemExit(main())
