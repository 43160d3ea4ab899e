#!/bin/sh
# Install SQaLe Desktop for the current user, from the unpacked release folder (no root needed):
#
#   ./install.sh              install into ~/.local (or $PREFIX), replacing an earlier install
#   ./install.sh --default    also make it the default application for SQLite files
#   ./install.sh --uninstall  remove what an install put there (settings, history and models stay)
#
# Installs the program folder to $PREFIX/lib/sqale-desktop, a launcher link $PREFIX/bin/sqale-desktop,
# the desktop entry (its Exec is the launcher's absolute path, so it works even when ~/.local/bin is
# not on the desktop session's PATH), the icon, and a shared-mime-info package for the .sqlite/.db3
# globs; then refreshes the desktop and MIME caches when their tools exist, which is what makes
# "Open with SQaLe Desktop" appear for SQLite files.
#
# A ~/.local/bin/sqale-desktop that this script did not make (a `pip install --user`, a script of
# your own) is left alone, at install and at uninstall; the desktop entry then starts the program
# folder's own copy.  Paths are written into the desktop entry quoted as the Desktop Entry spec
# says, so a HOME with spaces (or quotes, or a $) starts the right program.
set -eu

PREFIX=${PREFIX:-"$HOME/.local"}
DATA=${XDG_DATA_HOME:-"$PREFIX/share"}
APPDIR="$PREFIX/lib/sqale-desktop"
LAUNCHER="$PREFIX/bin/sqale-desktop"
DESKTOP="$DATA/applications/sqale-desktop.desktop"
ICON="$DATA/icons/hicolor/scalable/apps/sqale-desktop.svg"
MIME="$DATA/mime/packages/sqale-desktop.xml"
HERE=$(cd "$(dirname "$0")" && pwd)

# Whether $LAUNCHER is absent or the link an install made (to the program folder's program).
launcher_is_ours() {
    [ ! -e "$LAUNCHER" ] && [ ! -L "$LAUNCHER" ] && return 0
    [ -L "$LAUNCHER" ] && [ "$(readlink "$LAUNCHER")" = "$APPDIR/sqale-desktop" ]
}

# A path as one argument of a desktop entry's Exec key: in double quotes when it holds a reserved
# character, with " ` $ \ escaped by a backslash, % doubled, and then every backslash doubled
# again, because Exec is also a string value whose escapes are undone first (the spec's example:
# a literal $ in a quoted argument is written \\$).
exec_argument() {
    case "$1" in
        *[[:space:]\"\'\\\>\<~\|\&\;\$\*\?\#\(\)\`]*)
            printf '"%s"' "$(printf '%s' "$1" | sed -e 's/[\\"`$]/\\&/g' -e 's/%/%%/g' -e 's/\\/\\\\/g')" ;;
        *) printf '%s' "$1" | sed -e 's/%/%%/g' ;;
    esac
}

# A path as a plain string value (TryExec): only the string escape, a backslash doubled.
string_value() {
    printf '%s' "$1" | sed -e 's/\\/\\\\/g'
}

refresh_caches() {
    if command -v update-mime-database >/dev/null 2>&1; then update-mime-database "$DATA/mime" || true; fi
    if command -v update-desktop-database >/dev/null 2>&1; then
        update-desktop-database "$DATA/applications" || true
    fi
    if command -v gtk-update-icon-cache >/dev/null 2>&1; then
        gtk-update-icon-cache -q -t "$DATA/icons/hicolor" || true
    fi
}

uninstall() {
    if launcher_is_ours; then rm -f "$LAUNCHER"; fi
    rm -f "$DESKTOP" "$ICON" "$MIME"
    rm -rf "$APPDIR"
    refresh_caches
    echo "SQaLe Desktop removed (settings, conversation history and models are kept)."
}

case "${1:-}" in
    --uninstall) uninstall; exit 0 ;;
    --default|"") ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--default | --uninstall]" >&2; exit 2 ;;
esac

if [ ! -x "$HERE/sqale-desktop" ]; then
    echo "error: run install.sh from the unpacked sqale-desktop folder (no program next to it)" >&2
    exit 1
fi
RES="$HERE/_internal/resources"

# Copy into a new folder first and swap it in, so a failed copy leaves the old install working.
mkdir -p "$PREFIX/lib" "$PREFIX/bin"
rm -rf "$APPDIR.new"
cp -a "$HERE" "$APPDIR.new"
rm -f "$APPDIR.new/install.sh"
rm -rf "$APPDIR"
mv "$APPDIR.new" "$APPDIR"
PROGRAM="$LAUNCHER"
if launcher_is_ours; then
    ln -sfn "$APPDIR/sqale-desktop" "$LAUNCHER"
else
    PROGRAM="$APPDIR/sqale-desktop"
    echo "note: $LAUNCHER exists and is not from this installer; it is left as it is" >&2
fi

mkdir -p "$(dirname "$DESKTOP")" "$(dirname "$ICON")" "$(dirname "$MIME")"
EXEC_PROGRAM=$(exec_argument "$PROGRAM")
TRY_PROGRAM=$(string_value "$PROGRAM")
while IFS= read -r line; do
    case "$line" in
        "Exec=sqale-desktop "*) printf 'Exec=%s %s\n' "$EXEC_PROGRAM" "${line#Exec=sqale-desktop }" ;;
        "TryExec=sqale-desktop") printf 'TryExec=%s\n' "$TRY_PROGRAM" ;;
        *) printf '%s\n' "$line" ;;
    esac
done < "$RES/sqale-desktop.desktop" > "$DESKTOP"
cp "$RES/sqale-desktop.svg" "$ICON"
cp "$RES/sqale-desktop-mime.xml" "$MIME"
refresh_caches

if [ "${1:-}" = "--default" ]; then
    if command -v xdg-mime >/dev/null 2>&1; then
        xdg-mime default sqale-desktop.desktop application/vnd.sqlite3 application/x-sqlite3
    else
        echo "note: xdg-mime is not installed; choose SQaLe Desktop in your file manager's Open With" >&2
    fi
fi

echo "SQaLe Desktop installed: $PROGRAM"
case ":$PATH:" in
    *":$PREFIX/bin:"*) ;;
    *) echo "note: $PREFIX/bin is not on your PATH; the desktop entry works anyway" ;;
esac
