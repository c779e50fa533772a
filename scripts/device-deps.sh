#!/usr/bin/env bash
# Gathers what the GPU machine lacks into .devdeps/ (ignored by git; pass it in the device tool's
# `carry`): the Debian 12 headers and shared libraries of GMP, MPFR, MPFI and fmt (include/, lib/
# with their symlinks, and pkg-config files), and, when a CUDA build folder is given, its test and
# benchmark binaries (bin/), so they can run there without a build.
#   scripts/device-deps.sh [BUILD_DIR]
# On the device:  export LD_LIBRARY_PATH=$PWD/.devdeps/lib:$LD_LIBRARY_PATH
#   build there:  cmake -S . -B build-dev -G Ninja -DCMAKE_PREFIX_PATH=$PWD/.devdeps \
#                   -DCMAKE_LIBRARY_PATH=$PWD/.devdeps/lib -DCMAKE_INCLUDE_PATH=$PWD/.devdeps/include
#                 with PKG_CONFIG_PATH=$PWD/.devdeps/lib/pkgconfig
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=$root/.devdeps
exclude=$(git -C "$root" rev-parse --path-format=absolute --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.devdeps/' "$exclude" 2>/dev/null || echo '/.devdeps/' >>"$exclude"
rm -rf "$dest"
mkdir -p "$dest/include" "$dest/lib/pkgconfig" "$dest/bin"
for h in gmp.h mpfr.h mpf2mpfr.h mpfi.h mpfi_io.h; do
  src=$(find /usr/include -name "$h" -print -quit)
  [ -n "$src" ] && cp "$src" "$dest/include/"
done
cp -r /usr/include/fmt "$dest/include/"
for lib in libgmp libmpfr libmpfi libfmt; do
  cp -P /usr/lib/x86_64-linux-gnu/$lib.so* "$dest/lib/"
done
for pc in gmp mpfr fmt; do
  f=/usr/lib/x86_64-linux-gnu/pkgconfig/$pc.pc
  [ -f "$f" ] && sed "s|^prefix=.*|prefix=$dest|; s|^libdir=.*|libdir=\${prefix}/lib|; s|^includedir=.*|includedir=\${prefix}/include|" "$f" >"$dest/lib/pkgconfig/$pc.pc"
done
if [ $# -ge 1 ]; then
  for b in "$1"/tests/test_gpu "$1"/bench/bench_train_step "$1"/bench/bench_fp64_mma "$1"/bench/bench_step_timeline \
           "$1"/cli/statetrack; do
    [ -f "$b" ] && cp "$b" "$dest/bin/"
  done
  # bench_step_timeline's CUPTI, in case the GPU machine's CUDA lacks it
  cupti=$(ldconfig -p | awk '/libcupti.so.13 /{print $NF; exit}')
  [ -z "$cupti" ] && cupti=$(find /usr/local/cuda/ -name 'libcupti.so.13' -print -quit 2>/dev/null)
  [ -n "$cupti" ] && cp -L "$cupti" "$dest/lib/"
fi
du -sh "$dest"
