#!/usr/bin/env bash
# Linux artefacts from the PyInstaller folder dist/sqale-desktop (run by `make package`):
#
#   dist/sqale-desktop-VERSION-linux-ARCH.tar.gz   the folder plus install.sh (installs into ~/.local)
#   dist/sqale-desktop_VERSION_DEBARCH.deb         built with dpkg-deb; `sudo apt install ./that.deb`
#
# The .deb's Depends are computed, not guessed: every library that a file in the folder needs and
# PyInstaller did not bundle (it leaves out libc, OpenGL/EGL, libdrm, libxcb and Wayland, which must
# match the user's system) is mapped to its Debian package through the table below; a library
# missing from the table fails the build, so a new dependency cannot slip through unnoticed.
# Wayland libraries are Recommends (without them Qt falls back to xcb); GTK only feeds the optional
# gtk3 platform theme plugin (Suggests).
set -euo pipefail
cd "$(dirname "$0")/.."
APP=${1:-dist/sqale-desktop}
OUT=$(dirname "$APP")
[ -x "$APP/sqale-desktop" ] || { echo "error: $APP/sqale-desktop not found; run PyInstaller first" >&2; exit 1; }
RES="$APP/_internal/resources"

VERSION=$("$APP/sqale-desktop" --version | awk '{print $2}')
ARCH=$(uname -m)
DEBARCH=$(dpkg --print-architecture 2>/dev/null || echo "$ARCH")

# 1. The folder: Linux-only extras, and llama.cpp's duplicate libX.so/libX.so.0 copies as links.
cp packaging/linux/sqale-desktop-mime.xml "$RES/"
cp packaging/linux/install.sh "$APP/install.sh"
chmod 755 "$APP/install.sh"
for lib in "$APP"/_internal/llama_cpp/lib/lib*.so; do
    for versioned in "$lib".[0-9]*; do
        if [ -f "$versioned" ] && [ ! -L "$versioned" ] && cmp -s "$lib" "$versioned"; then
            ln -sf "$(basename "$lib")" "$versioned"
        fi
    done
done

# Python built with pyenv (or any prefix) leaves its build folder in RUNPATH: a path that means
# nothing on the user's machine, where the loader would still search it.  $ORIGIN paths stay.
if command -v patchelf >/dev/null; then
    find "$APP/_internal" -type f -name '*.so*' | while read -r f; do
        rpath=$(patchelf --print-rpath "$f" 2>/dev/null) || continue
        [ -n "$rpath" ] || continue
        kept=$(printf '%s' "$rpath" | tr ':' '\n' | grep '^\$ORIGIN' | paste -sd: || true)
        if [ "$kept" != "$rpath" ]; then
            if [ -n "$kept" ]; then patchelf --set-rpath "$kept" "$f"; else patchelf --remove-rpath "$f"; fi
        fi
    done
else
    echo "note: patchelf not found: build-time RUNPATHs are left in the libraries"
fi

# The interpreter's own libraries (libpython, lib-dynload) often come unstripped from a local
# Python build (pyenv): strip them (libpython alone drops from ~23 MB to ~5 MB).  Wheels' binaries
# stay as their projects built them: some were patched by auditwheel and break when stripped.
if command -v strip >/dev/null; then
    find "$APP/_internal" -maxdepth 1 -type f -name 'libpython3*.so*' -exec strip --strip-unneeded {} +
    find "$APP/_internal" -path '*/lib-dynload/*.so' -type f -exec strip --strip-unneeded {} +
fi

# 2. The tarball (a top-level sqale-desktop/ folder; install.sh inside it).  Earlier versions'
# artefacts go first, so that dist/ holds exactly one of each.
rm -f "$OUT"/sqale-desktop-*-linux-*.tar.gz "$OUT"/sqale-desktop_*.deb
TARBALL="$OUT/sqale-desktop-$VERSION-linux-$ARCH.tar.gz"
tar -C "$OUT" -czf "$TARBALL" "$(basename "$APP")"

# 3. The .deb.
command -v dpkg-deb >/dev/null || { echo "dpkg-deb not found: no .deb built"; exit 0; }
declare -A PKG=(
    [libc.so.6]=libc6 [libm.so.6]=libc6 [libdl.so.2]=libc6 [libpthread.so.0]=libc6 [librt.so.1]=libc6
    [libresolv.so.2]=libc6 [libutil.so.1]=libc6 [ld-linux-x86-64.so.2]=libc6 [ld-linux-aarch64.so.1]=libc6
    [libGL.so.1]=libgl1 [libGLX.so.0]=libglx0 [libGLdispatch.so.0]=libglvnd0 [libEGL.so.1]=libegl1
    [libOpenGL.so.0]=libopengl0 [libdrm.so.2]=libdrm2 [libxcb.so.1]=libxcb1
    [libxcb-icccm.so.4]=libxcb-icccm4 [libxcb-keysyms.so.1]=libxcb-keysyms1
    [libwayland-client.so.0]=libwayland-client0 [libwayland-cursor.so.0]=libwayland-cursor0
    [libwayland-egl.so.1]=libwayland-egl1
    [libgtk-3.so.0]=libgtk-3-0 [libgdk-3.so.0]=libgtk-3-0
    [libvulkan.so.1]=libvulkan1
)
# The Vulkan loader is only needed by llama.cpp's Vulkan backend (libggml-vulkan.so), which the app
# loads at run time and does without (then it runs on the CPU and says why): a Recommends, so a
# machine without Vulkan still installs the package.  The drivers come with the user's GPU stack;
# Mesa's (radv for AMD, anv for Intel) are a Suggests.
RECOMMENDS_PKGS=" libwayland-client0 libwayland-cursor0 libwayland-egl1 libvulkan1 "
SUGGESTS_PKGS=" libgtk-3-0 mesa-vulkan-drivers "

BUNDLE_DIRS=$(find "$(cd "$APP" && pwd)" -type d | tr '\n' ':')
mapfile -t ELFS < <(find "$APP" -type f \( -name '*.so*' -o -name sqale-desktop \) -exec sh -c \
    'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
declare -A NEED=()
for f in "${ELFS[@]}"; do
    while read -r name _ target _; do
        case "$target" in "$(cd "$APP" && pwd)"*) continue ;; esac
        NEED[$name]=1
    done < <(LD_LIBRARY_PATH=$BUNDLE_DIRS ldd "$f" 2>/dev/null | grep '=>' || true)
done
declare -A DEPS=() RECS=() SUGS=()
unknown=()
for name in "${!NEED[@]}"; do
    pkg=${PKG[$name]:-}
    if [ -z "$pkg" ]; then unknown+=("$name"); continue; fi
    if [[ $RECOMMENDS_PKGS == *" $pkg "* ]]; then RECS[$pkg]=1
    elif [[ $SUGGESTS_PKGS == *" $pkg "* ]]; then SUGS[$pkg]=1
    else DEPS[$pkg]=1; fi
done
if [ ${#unknown[@]} -gt 0 ]; then
    echo "error: no Debian package known for ${unknown[*]}: add it to the table in $0" >&2
    exit 1
fi
# The newest glibc symbol version any file uses is the libc6 version the package needs.
GLIBC=$(for f in "${ELFS[@]}"; do objdump -T "$f" 2>/dev/null; done |
    grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
deps=""
for pkg in $(printf '%s\n' "${!DEPS[@]}" | sort); do
    if [ "$pkg" = libc6 ] && [ -n "$GLIBC" ]; then pkg="libc6 (>= $GLIBC)"; fi
    deps+="${deps:+, }$pkg"
done
join() { local IFS=,; printf '%s' "$*" | sed 's/,/, /g'; }
recs=$(join $(printf '%s\n' "${!RECS[@]}" | sort))
[ -n "${RECS[libvulkan1]:-}" ] && SUGS[mesa-vulkan-drivers]=1
sugs=$(join $(printf '%s\n' "${!SUGS[@]}" | sort))

STAGE="build/deb/sqale-desktop_${VERSION}_$DEBARCH"
rm -rf "$STAGE"
mkdir -p "$STAGE/DEBIAN" "$STAGE/usr/lib" "$STAGE/usr/bin" "$STAGE/usr/share/applications" \
    "$STAGE/usr/share/icons/hicolor/scalable/apps" "$STAGE/usr/share/mime/packages" \
    "$STAGE/usr/share/doc/sqale-desktop" "$STAGE/usr/share/man/man1" "$STAGE/usr/share/lintian/overrides"
cp -a "$APP" "$STAGE/usr/lib/sqale-desktop"
rm -f "$STAGE/usr/lib/sqale-desktop/install.sh"
ln -s ../lib/sqale-desktop/sqale-desktop "$STAGE/usr/bin/sqale-desktop"
install -m644 "$RES/sqale-desktop.desktop" "$STAGE/usr/share/applications/sqale-desktop.desktop"
install -m644 "$RES/sqale-desktop.svg" "$STAGE/usr/share/icons/hicolor/scalable/apps/sqale-desktop.svg"
install -m644 "$RES/sqale-desktop-mime.xml" "$STAGE/usr/share/mime/packages/sqale-desktop.xml"
install -m644 packaging/linux/copyright "$STAGE/usr/share/doc/sqale-desktop/copyright"
sed "s/@VERSION@/$VERSION/; s/@DATE@/$(date -R -u -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")/" \
    packaging/linux/changelog | gzip -9n > "$STAGE/usr/share/doc/sqale-desktop/changelog.gz"
sed "s/@VERSION@/$VERSION/" packaging/linux/sqale-desktop.1 | gzip -9n > "$STAGE/usr/share/man/man1/sqale-desktop.1.gz"
install -m644 packaging/linux/lintian-overrides "$STAGE/usr/share/lintian/overrides/sqale-desktop"
# dpkg's own triggers (shared-mime-info, desktop-file-utils, hicolor-icon-theme) refresh the MIME,
# desktop and icon caches for files in these folders: no maintainer scripts are needed.
find "$STAGE" -type d -exec chmod 755 {} +
find "$STAGE/usr/share" -type f -exec chmod 644 {} +
find "$STAGE/usr/lib/sqale-desktop" -type f -name '*.so*' -exec chmod 644 {} +

{
    echo "Package: sqale-desktop"
    echo "Version: $VERSION"
    echo "Architecture: $DEBARCH"
    echo "Maintainer: SQaLe Desktop developers <sqale-desktop@users.noreply.github.com>"
    echo "Installed-Size: $(du -sk --apparent-size "$STAGE/usr" | cut -f1)"
    echo "Depends: $deps"
    [ -n "$recs" ] && echo "Recommends: $recs"
    [ -n "$sugs" ] && echo "Suggests: $sugs"
    echo "Section: database"
    echo "Priority: optional"
    echo "Homepage: https://github.com/sqale-desktop/sqale-desktop"
    echo "Description: desktop chat for local SQLite databases"
    echo " Open a SQLite database, ask a question in plain English, and a small local"
    echo " text-to-SQL agent (run in-process with llama.cpp) explores the database through"
    echo " tools and answers with a tested SQL query and its result. Databases are only"
    echo " ever opened read-only. Self-contained: Python, Qt and llama.cpp are bundled."
} > "$STAGE/DEBIAN/control"
(cd "$STAGE" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$STAGE/DEBIAN/md5sums"
chmod 644 "$STAGE/DEBIAN/control" "$STAGE/DEBIAN/md5sums"
DEB="$OUT/sqale-desktop_${VERSION}_$DEBARCH.deb"
# gzip, not xz: xz takes ~5 minutes on two cores for ~25 MB less.
dpkg-deb --root-owner-group -Zgzip --build "$STAGE" "$DEB" >/dev/null

echo "Depends: $deps"
echo "sizes:"
du -sh "$APP" "$TARBALL" "$DEB" | sed 's/^/  /'
echo "largest parts of the folder:"
# sed, not head: head exits after 8 lines and, under pipefail, sort's SIGPIPE (141) failed the build.
du -sh "$APP"/_internal/* | sort -rh | sed -n '1,8s/^/  /p'
