# Sourced by the scripts/gpu-*.sh: how a build travels to the GPU machine and is unpacked there.
#
# The GPU machine has CUDA but none of our Debian libraries, and a device call carries at most
# 64 MiB with the tree, so `carry_stage` builds here and packs into $BUILD/carry:
#   bins.tar.xz  folio and folio_cuda_tests, stripped (~20 MB each unpacked: many kernel
#                instantiations)
#   libs.tar.xz  the shared libraries they need beyond glibc/libstdc++/CUDA/NCCL (OpenBLAS and its
#                gfortran/quadmath deps, PCRE2, utf8proc, xxHash...)
#   source_dir   this checkout's path: the test binaries read fixtures through paths compiled in
# and `carry_unpack` (there) unpacks both, sets LD_LIBRARY_PATH and links source_dir to the
# checkout it runs in.

carry_stage() {
  local build=$1 carry=$1/carry
  cmake -S . -B "$build" -DFOLIO_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j2 --target folio_cuda_tests folio
  rm -rf "$carry" && mkdir -p "$carry"
  cp "$build/tests/cuda/folio_cuda_tests" "$build/src/tools/folio" "$carry/"
  strip "$carry/folio_cuda_tests" "$carry/folio"
  tar -C "$carry" -cf - folio folio_cuda_tests | xz -T2 -9e >"$carry/bins.tar.xz"
  rm "$carry/folio" "$carry/folio_cuda_tests"
  pwd >"$carry/source_dir"
  local libs
  libs=$(mktemp -d)
  ldd "$build/tests/cuda/folio_cuda_tests" "$build/src/tools/folio" | awk '/=> \// {print $3}' |
    grep -vE 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl\.so|librt\.so|libcuda|libcublas|libcudart|libnccl' |
    sort -u | xargs -I{} cp -L {} "$libs/"
  tar -C "$libs" -cf - . | xz -9e >"$carry/libs.tar.xz" && rm -rf "$libs"
  du -sh "$carry"
}

carry_unpack() {
  local carry=$1 libs=/tmp/folio-gpu-libs
  [[ -x $carry/folio ]] || tar -C "$carry" -xJf "$carry/bins.tar.xz"
  mkdir -p "$libs"
  tar -C "$libs" -xJf "$carry/libs.tar.xz" 2>/dev/null ||
    python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
      "$carry/libs.tar.xz" "$libs"
  export LD_LIBRARY_PATH="$libs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  local src
  src=$(cat "$carry/source_dir" 2>/dev/null || echo /work/main)
  if [[ ! -e $src ]]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
  if ldd "$carry/folio" "$carry/folio_cuda_tests" | grep 'not found'; then
    echo "missing libraries" >&2
    return 1
  fi
}

# The start of a device-side scripts/gpu-*.sh run from the repository root: sets CARRY (the carried
# build under ${BUILD:-build-cudaexec}), unpacks it, and makes `out` ($OUT, or /tmp/folio-gpu-NAME).
# `carry_start NAME || exit 1`.
carry_start() {
  CARRY=${BUILD:-build-cudaexec}/carry
  carry_unpack "$CARRY" || return 1
  out=${OUT:-/tmp/folio-gpu-$1}
  mkdir -p "$out"
}

# The start of a script that drives the `folio` binary (scripts/gpu-serve.sh, gpu-admission.sh):
# FOLIO set = a local build (a smoke run without a GPU; `out` is $OUT or /tmp/folio-gpu-NAME),
# else the carried build (carry_start). Then this output also goes to $out/NAME.log, headed by
# the GPU and the date. `folio_start NAME || exit 1`.
folio_start() {
  if [[ -n ${FOLIO:-} ]]; then
    out=${OUT:-/tmp/folio-gpu-$1}
    mkdir -p "$out"
  else
    carry_start "$1" || return 1
    FOLIO=$CARRY/folio
  fi
  exec > >(tee "$out/$1.log") 2>&1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
  date -u +%FT%TZ
}

# A/B of whole builds within the 64 MiB a device call carries (the tracked tree alone is ~48 MB,
# one carry folder 13 MB): `carry_ab_pack DIR NAME=BUILD...` (here; BUILD a build folder or a
# folio_cuda_tests binary copied aside) puts each build's stripped folio_cuda_tests under NAME/
# in one solid xz (builds that differ in a few kernels compress to
# little more than one: three in 7.9 MB), with the libraries and source_dir beside it;
# `carry_ab_unpack DIR` (there) unpacks it to DIR/NAME/folio_cuda_tests and sets LD_LIBRARY_PATH.
# Build each tree in turn (git checkout, cmake --build BUILD --target folio_cuda_tests) and copy
# the binary out before the next checkout, or keep one build folder per tree.
carry_ab_pack() {
  local dir=$1 tmp spec name build
  shift
  tmp=$(mktemp -d)
  for spec in "$@"; do
    name=${spec%%=*} build=${spec#*=}
    mkdir -p "$tmp/$name"
    local bin=$build/tests/cuda/folio_cuda_tests
    [[ -f $build ]] && bin=$build  # NAME=path/to/folio_cuda_tests (a copy kept aside)
    cp "$bin" "$tmp/$name/folio_cuda_tests" && strip "$tmp/$name/folio_cuda_tests"
  done
  rm -rf "$dir" && mkdir -p "$dir"
  tar -C "$tmp" -cf - . | xz -T1 -9e >"$dir/tests.tar.xz"  # one thread: one solid block
  local libs
  libs=$(mktemp -d)
  ldd "$tmp"/*/folio_cuda_tests | awk '/=> \// {print $3}' |
    grep -vE 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl\.so|librt\.so|libcuda|libcublas|libcudart|libnccl' |
    sort -u | xargs -I{} cp -L {} "$libs/"
  tar -C "$libs" -cf - . | xz -9e >"$dir/libs.tar.xz"
  pwd >"$dir/source_dir"
  rm -rf "$tmp" "$libs"
  du -sh "$dir"
}

carry_ab_unpack() {
  local dir=$1 libs=/tmp/folio-gpu-libs src
  tar -C "$dir" -xJf "$dir/tests.tar.xz"
  mkdir -p "$libs" && tar -C "$libs" -xJf "$dir/libs.tar.xz"
  export LD_LIBRARY_PATH="$libs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  src=$(cat "$dir/source_dir" 2>/dev/null || echo /work/main)
  if [[ ! -e $src ]]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
  if ldd "$dir"/*/folio_cuda_tests | grep 'not found'; then
    echo "missing libraries" >&2
    return 1
  fi
}

# The GPU's clock and power beside a benchmark (nvidia-smi every 200 ms): `power_start NAME` before
# it, `power_stop` after; prints one line (samples over 200 W, mean SM clock and power, how many
# were power-capped: throttle reason bit 2, "SW power cap") and keeps $out/smi-NAME.csv. Session 35
# found the H200 at its 700 W cap through long prefills and B2's decode (NOTES.md).
power_start() {
  POWER_NAME=$1
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active \
    --format=csv,noheader,nounits -lms 200 >"$out/smi-$1.csv" 2>/dev/null &
  POWER_PID=$!
}
power_stop() {
  kill "$POWER_PID" 2>/dev/null
  wait "$POWER_PID" 2>/dev/null
  power_summary "$POWER_NAME" "$out/smi-$POWER_NAME.csv"
}
# power_summary NAME CSV: the line power_stop prints, from a CSV of those four columns.
power_summary() {
  awk -F', ' -v name="$1" '$3 > 200 { n++; c += $2; p += $3; if ($4 ~ /[4567cdefCDEF]$/) cap++ }
    END { if (n) printf "  power %s: %d samples over 200 W, SM clock mean %.0f MHz, %.0f W, power-capped in %d\n", name, n, c / n, p / n, cap
          else printf "  power %s: no sample over 200 W\n", name }' "$2"
}
