#!/usr/bin/env bash
# Makes what a session carries to the device machine (an NVIDIA H200, Python 3.12, jax 0.11.2 and
# torch's CUDA 13 runtime wheels installed, no network) to run the plugin on MLX's CUDA backend.
# Not part of the build or CI: it downloads the mlx / mlx-cuda-13 wheels from PyPI.
#
#   scripts/device_kit.sh [NAME=LIBRARY.so ...]    # default: head=build/src/pjrt/libjax_mlx_pjrt.so
#
# Writes (all git-excluded):
#   .cuda1/p1, .cuda2/p2   the mlx-cuda-13 wheel (90 MB) in two parts: a call carries at most 64 MiB
#   .devcarry/             the mlx wheel, each library stripped as lib_NAME.so, and env.sh
# Two back-to-back device calls (the machine is given back 30 s after a call):
#   run(carry=[".cuda1"], command="cp .cuda1/p1 /tmp/p1")
#   run(carry=[".cuda2", ".devcarry"], command="LIB=.devcarry/lib_head.so source .devcarry/env.sh; \
#       python3 bench/run.py --device-columns ...")
# env.sh installs both wheels into /tmp/site once per machine, points the plugin at $LIB and
# MLX at torch's NVIDIA libraries. Later calls on the same machine need only .devcarry.
set -euo pipefail
cd "$(dirname "$0")/.."
MLX_VERSION=0.32.4

libs=("$@")
[[ ${#libs[@]} -gt 0 ]] || libs=("head=build/src/pjrt/libjax_mlx_pjrt.so")
for entry in "${libs[@]}"; do
  [[ -f "${entry#*=}" ]] || { echo "no library at ${entry#*=}: run make build first" >&2; exit 2; }
done

for d in .devcarry .cuda1 .cuda2; do
  grep -qx "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >> .git/info/exclude
done
mkdir -p .devcarry .cuda1 .cuda2 .devcarry/wheels
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_35_x86_64 -d .devcarry/wheels \
  "mlx==$MLX_VERSION" "mlx-cuda-13==$MLX_VERSION"
cuda_wheel=$(ls .devcarry/wheels/mlx_cuda_13-"$MLX_VERSION"-*.whl)
head -c 52000000 "$cuda_wheel" > .cuda1/p1
tail -c +52000001 "$cuda_wheel" > .cuda2/p2
mv .devcarry/wheels/mlx-"$MLX_VERSION"-*.whl .devcarry/
rm -rf .devcarry/wheels

for entry in "${libs[@]}"; do
  strip --strip-debug -o ".devcarry/lib_${entry%%=*}.so" "${entry#*=}"
done

cat > .devcarry/env.sh <<EOF
# Source from the repository root on the device machine; LIB picks the plugin library.
if [ ! -d /tmp/site/mlx ]; then
  if [ -f .cuda2/p2 ]; then cat /tmp/p1 .cuda2/p2 > /tmp/$(basename "$cuda_wheel"); fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \\
    .devcarry/mlx-$MLX_VERSION-*.whl /tmp/$(basename "$cuda_wheel") || echo "INSTALL FAILED"
fi
SP=\$(python3 -c 'import site; print(site.getsitepackages()[0])')
[ -e /tmp/site/nvidia ] || ln -s "\$SP/nvidia" /tmp/site/nvidia
NVLIBS=\$(find -L "\$SP/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' :)
export LD_LIBRARY_PATH=/tmp/site/mlx/lib:\$NVLIBS\$LD_LIBRARY_PATH
# Not bench/: its profile.py would shadow the standard library's (pytest-benchmark imports it).
export PYTHONPATH=/tmp/site:\$PWD/python
export JAX_MLX_LIBRARY_PATH=\$PWD/\${LIB:-.devcarry/lib_head.so}
export PYTHONUNBUFFERED=1
EOF
du -sh .cuda1 .cuda2 .devcarry
