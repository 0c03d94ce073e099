#!/usr/bin/env bash
# Runs the program tests against ONE built plugin under several jax/jaxlib versions, each in its
# own venv, and prints a Markdown row per version (not part of CI: it installs several jaxlibs).
#
#   scripts/jax_versions.sh [--python PY] [--wheels DIR] [--plugin SO] [--venvs DIR] VERSION...
#
#   --python  interpreter for the venvs (jax >= 0.11 needs Python >= 3.12)   default: python3
#   --wheels  install from this directory only (pip --no-index), for machines without PyPI
#   --plugin  the plugin library every version runs           default: python/jax_plugins/mlx/...
#   --venvs   where the per-version venvs live                default: .venv-versions
#
# The plugin finds libmlx through its RUNPATH (the build venv) or LD_LIBRARY_PATH; the per-version
# venvs need only jax, jaxlib and the test tools. Example (this machine, Python 3.11):
#   scripts/jax_versions.sh 0.10.0 0.10.1 0.10.2
set -euo pipefail
cd "$(dirname "$0")/.."

python=python3 wheels="" plugin="$PWD/python/jax_plugins/mlx/libjax_mlx_pjrt.so" venvs=.venv-versions
while [[ $# -gt 0 ]]; do
  case "$1" in
    --python) python=$2; shift 2 ;;
    --wheels) wheels=$2; shift 2 ;;
    --plugin) plugin=$(realpath "$2"); shift 2 ;;
    --venvs) venvs=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || { echo "usage: $0 [options] VERSION..." >&2; exit 2; }
[[ -f "$plugin" ]] || { echo "no plugin at $plugin: run make build first" >&2; exit 2; }

# The test tools at the versions requirements-linux.txt pins (jax pins excluded).
tools=$(grep -E '^(numpy|pytest|optax|absl-py|ml_dtypes)==' requirements-linux.txt | tr '\n' ' ')
pip_source=()
[[ -n "$wheels" ]] && pip_source=(--no-index --find-links "$wheels")

tests=(tests/test_platform.py tests/test_buffers.py tests/test_execute.py tests/test_errors.py
       tests/test_programs.py tests/test_random.py)

echo "| jax/jaxlib | python | passed | failed | skipped/xfailed |"
echo "|---|---|---:|---:|---:|"
for version in "$@"; do
  venv="$venvs/$version"
  if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet "${pip_source[@]}" "jax==$version" "jaxlib==$version" $tools
    "$venv/bin/python" -c "import site, pathlib; pathlib.Path(site.getsitepackages()[0], 'jax_mlx_dev.pth').write_text('$PWD/python\n')"
  fi
  log="$venv/pytest.log"
  JAX_MLX_LIBRARY_PATH="$plugin" "$venv/bin/python" -m pytest -q -p no:cacheprovider "${tests[@]}" \
    >"$log" 2>&1 || true
  summary=$(tail -n 1 "$log")
  count() { grep -oE "[0-9]+ $1" <<<"$summary" | grep -oE '^[0-9]+' || echo 0; }
  skipped=$(( $(count skipped) + $(count xfailed) ))
  echo "| $version | $("$venv/bin/python" -c 'import platform; print(platform.python_version())') |" \
       "$(count passed) | $(( $(count failed) + $(count error) )) | $skipped |"
done
