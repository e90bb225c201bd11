#!/usr/bin/env bash
# bundle.sh OUT_DIR GMSIM GMREPLAY - a folder that runs gmsim and gmreplay on
# a machine without HDF5, GSL or jansson installed (a GPU box): the two
# binaries in OUT_DIR/bin, and every shared library ldd says they need in
# OUT_DIR/lib, except the C library itself and the NVIDIA driver (which must
# come from the machine). replay/device-check.sh OUT_DIR uses it.
# Built by `cmake --build BUILD --target gmreplay-bundle`.
set -eu
out=$1
shift
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for exe in "$@"; do
    cp "$exe" "$out/bin/"
    ldd "$exe" | awk '/=> \// { print $3 }' | while read -r lib; do
        case "$(basename "$lib")" in
        libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libresolv.so.* | \
            libutil.so.* | libnsl.so.* | libanl.so.* | ld-linux*.so.* | \
            libcuda.so* | libnvidia*) ;;
        *) cp -L "$lib" "$out/lib/" ;;
        esac
    done
done
{
    echo "gmsim bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
    echo "glibc: $(ldd --version | head -1)"
    "$out/bin/gmsim" --version
} >"$out/BUNDLE.txt"
echo "bundle: $out ($(du -sh "$out" | cut -f1))"
