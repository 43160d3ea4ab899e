"""`python -m sqale_desktop`: the same entry point as the `sqale-desktop` command."""

from sqale_desktop.cli import main

raise SystemExit(main())
