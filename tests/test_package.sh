#!/usr/bin/env bash
# Builds the Debian package with CPack, installs it into a private dpkg root (the machine's own
# packages are left alone) and checks what a user gets: both programs running, the desktop
# entry, the icon and valid AppStream metadata. Usage: test_package.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cpack -G DEB -B "$work/pkg" --config "$build/CPackConfig.cmake" >"$work/cpack.log" 2>&1 ||
    { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/pkg/ttrace_*.deb)
echo "package: $(basename "$deb")"
dpkg-deb --field "$deb" Depends | tee "$work/depends"
grep -q libqt6widgets6 "$work/depends"  # dpkg-shlibdeps found the shared libraries
grep -q libhdf5 "$work/depends"

root="$work/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
# Dependencies are installed on the machine, not in the private database.
dpkg --root="$root" --force-depends -i "$deb" >"$work/dpkg.log" 2>&1 ||
    { cat "$work/dpkg.log"; exit 1; }
dpkg --root="$root" -L ttrace >"$work/files"
for f in /usr/bin/ttrace /usr/bin/ttrace-check /usr/libexec/ttrace/ttrace-hdf5-worker \
         /usr/share/applications/ttrace.desktop \
         /usr/share/icons/hicolor/scalable/apps/ttrace.svg \
         /usr/share/metainfo/io.github.ttrace.ttrace.metainfo.xml; do
    grep -qx "$f" "$work/files" || { echo "missing from the package: $f"; exit 1; }
done

"$root/usr/bin/ttrace-check" --version | grep -q "ttrace-check 0.1.0"
# The installed checker finds its HDF5 worker (in ../libexec/ttrace; it warns when it does not)
# and checks the bundled samples with it.
samples="$(dirname "$0")/../resources/samples/clean"
env -u TTRACE_HDF5_WORKER "$root/usr/bin/ttrace-check" --no-cache --quiet "$samples/dist" \
    "$samples/ref" --perturbed "$samples/pert" 2>"$work/check.err"
if [ -s "$work/check.err" ]; then
    cat "$work/check.err"
    exit 1
fi
QT_QPA_PLATFORM=offscreen "$root/usr/bin/ttrace" --help | grep -q -- "--perturbed"
desktop-file-validate "$root/usr/share/applications/ttrace.desktop"
appstreamcli validate --no-net "$root/usr/share/metainfo/io.github.ttrace.ttrace.metainfo.xml"
echo "package test: 1 passed, 0 failed"
