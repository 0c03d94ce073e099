#!/usr/bin/env bash
# Builds the libFuzzer targets of the reader (clang-14, ASan+UBSan, tree build-fuzz) and runs them.
#
#   scripts/fuzz_reader.sh [SECONDS] [TARGET...]      default: 60 s, reader_fuzz and bytecode_fuzz
#
# The time is split evenly between the targets that exist. Seeds: ../shared/testdata (vhlo/*.bc,
# jax-*/*.mlirbc) plus artifacts generated from tests/reader/programs.py (cached in the build tree).
# The corpus grows in build-fuzz/fuzz-corpus/<target> across runs. Exits non-zero on any crash,
# leak, timeout or OOM; the reproducer is saved as /tmp/fuzz-crashes/<target>-crash-<sha1> (etc.).
# Env: JAXMLX_FUZZ_BUILD (build dir), JAXMLX_FUZZ_JOBS (make -j, default 2), FUZZ_EXTRA_ARGS
# (more libFuzzer flags), JAXMLX_FUZZ_CXXFLAGS (more compiler flags; applied at configure time).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_TOTAL="${1:-60}"
shift || true
TARGETS=("$@")
BUILD="${JAXMLX_FUZZ_BUILD:-$ROOT/build-fuzz}"
JOBS="${JAXMLX_FUZZ_JOBS:-2}"
TESTDATA="${JAXMLX_TESTDATA:-$ROOT/../shared/testdata}"
CRASH_DIR=/tmp/fuzz-crashes
PY="$ROOT/.venv/bin/python"

# --- configure + build -------------------------------------------------------------------------
# fuzz/ is its own CMake project here (it globs the reader's sources), so the fuzz tree does not
# depend on the top-level CMakeLists.txt or MLX.
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$ROOT/fuzz" -B "$BUILD" -G "Unix Makefiles" \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJAXMLX_FUZZ=ON \
    -DJAXMLX_SANITIZE=address,undefined \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link -gline-tables-only ${JAXMLX_FUZZ_CXXFLAGS:-}" \
    -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" >/dev/null
else
  cmake "$BUILD" >/dev/null
fi
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  TARGETS=()
  # Read the target list once: `make help | grep -q` dies of SIGPIPE under pipefail.
  available="$(make -C "$BUILD" help)"
  for t in reader_fuzz bytecode_fuzz; do
    if grep -q "\.\.\. $t\$" <<<"$available"; then TARGETS+=("$t"); fi
  done
fi
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  echo "fuzz_reader: no fuzz target is defined yet (src/bytecode or src/vhlo missing)" >&2
  exit 1
fi
if ! nice -n 10 cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" >"$BUILD/build.log" 2>&1; then
  grep -E "error|Error" "$BUILD/build.log" | head -20 >&2
  echo "fuzz_reader: build failed (full log: $BUILD/build.log)" >&2
  exit 2
fi

# --- seeds -------------------------------------------------------------------------------------
SEEDS="$BUILD/fuzz-seeds"
mkdir -p "$SEEDS" "$CRASH_DIR"
cp -f "$TESTDATA"/vhlo/*.bc "$SEEDS"/ 2>/dev/null || true
for f in "$TESTDATA"/jax-*/*.mlirbc; do cp -f "$f" "$SEEDS/$(basename "$(dirname "$f")")-$(basename "$f")"; done
if [[ ! -d "$SEEDS/gen" && -x "$PY" ]]; then
  # Every 8th program at the minimum and current StableHLO versions (bytecode v0 and v6).
  targets="$("$PY" -c 'from jaxlib.mlir.dialects import stablehlo as s; print(s.get_minimum_version()+","+s.get_current_version())')"
  JAX_PLATFORMS=cpu nice -n 10 "$PY" "$ROOT/tests/reader/programs.py" "$SEEDS/gen.tmp" \
    --targets "$targets" --stride 8 2>/dev/null && mv "$SEEDS/gen.tmp" "$SEEDS/gen"
fi

# --- run ---------------------------------------------------------------------------------------
per_target=$(( SECONDS_TOTAL / ${#TARGETS[@]} ))
(( per_target > 0 )) || per_target=1
status=0
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/fuzz-corpus/$t"
  mkdir -p "$corpus"
  echo "fuzz_reader: $t for ${per_target}s (corpus $corpus)" >&2
  # -max_len covers the largest seed; detect_leaks is on by default with ASan.
  if ! ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:symbolize=1" \
       UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
       nice -n 10 "$BUILD/$t" -max_total_time="$per_target" -max_len=65536 -timeout=10 \
         -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$CRASH_DIR/$t-" \
         ${FUZZ_EXTRA_ARGS:-} "$corpus" "$SEEDS"; then
    echo "fuzz_reader: $t FAILED; reproducer(s) in $CRASH_DIR:" >&2
    ls -t "$CRASH_DIR" | grep "^$t-" | head -5 >&2 || true
    status=1
  fi
done
exit $status
