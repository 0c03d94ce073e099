"""JAXMLX_GRAPH_STATS=<file>: every run appends the MLX primitives it is about to evaluate. These
tests read it to check that lowering adds no primitive it can do without, traced for graph
replay (the CPU default) as when run eagerly: a sum from jax's 0 adds no init, a keepdims
broadcast of a reduction reshapes nothing back, a bias broadcast onto trailing dims needs no
reshape. Each primitive is a kernel launch on a GPU and a scheduler task on MLX's CPU."""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys

import pytest

from tests.stats_log import last_run_counts, with_fused_ops

CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
rng = np.random.default_rng(0)
x = rng.standard_normal((4, 8)).astype(np.float32)
x3 = rng.standard_normal((2, 3, 8)).astype(np.float32)
b = rng.standard_normal((8,)).astype(np.float32)
i = rng.integers(-100, 100, (4, 8)).astype(np.int32)
# Small integers in floats: matmuls and convolutions exact in any summation order.
g = rng.integers(-4, 5, (8, 16)).astype(np.float32)
w = rng.integers(-4, 5, (32, 16)).astype(np.float32)
img = rng.integers(-4, 5, (2, 6, 6, 4)).astype(np.float32)
k = rng.integers(-4, 5, (3, 3, 4, 6)).astype(np.float32)
lab = rng.integers(0, 8, (4,)).astype(np.int32)
hq = rng.integers(-4, 5, (2, 5, 3, 8)).astype(np.float32)  # [batch, seq, heads, head dim]
hk = rng.integers(-4, 5, (2, 6, 3, 8)).astype(np.float32)

def row_sum(x): return jnp.sum(x, axis=1)
def int_row_sum(i): return jnp.sum(i, axis=1)
def row_max(x): return jnp.max(x, axis=1)
def centered(x): return x - x.sum(1, keepdims=True)
def biased(x3, b): return x3 * 2.0 + b
def times_transposed(g, w): return g @ w.T
def row_times_transposed(g, w): return g[:1] @ w.T
def times_plain(g): return g.T @ g
def conv(img, k):
  return jax.lax.conv_general_dilated(img, k, (1, 1), "SAME",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))
def conv_input_dilated(img, k):
  return jax.lax.conv_general_dilated(img, k, (1, 1), [(1, 1), (2, 0)], lhs_dilation=(2, 2),
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))
def conv_input_dilated_9x(img, k):
  return jax.lax.conv_general_dilated(img, k, (1, 1), [(1, 1), (2, 0)], lhs_dilation=(3, 3),
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))
def grouped_conv(img, k):
  return jax.lax.conv_general_dilated(img, k[:, :, :2], (1, 1), "SAME", feature_group_count=2,
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))
def depthwise_conv(img, k):
  return jax.lax.conv_general_dilated(img, k[:, :, :1, :4], (1, 1), "SAME", feature_group_count=4,
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))
def weight_grad(x, g):  # jax writes it as dot_general(cotangent, x), then transpose [1, 0]
  return jax.grad(lambda w: jnp.sum(jnp.sin(x @ w)))(g)
def conv_weight_grad(img, k):  # jax's kernel gradient: x read as [C, H, W, N], dy as [O, H, W, N]
  return jax.grad(lambda w: jnp.sum(jax.lax.conv_general_dilated(
      img, w, (2, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) ** 2))(k)
def head_scores(hq, hk):  # attention's q k^T, heads split out of the model dim
  return jnp.einsum("bqhd,bkhd->bhqk", hq, hk)
def padded(x):  # edge padding by a constant
  return jnp.pad(x, ((1, 2), (0, 3)), constant_values=5.0)
def label_pick_grad(x, lab):  # a cross-entropy's label pick and its transpose
  return jax.grad(lambda x: (jnp.take_along_axis(x, lab[:, None], axis=1) ** 2).sum())(x)

for f, args in [(label_pick_grad, (x, lab)), (weight_grad, (x, g)),
                (row_sum, (x,)), (int_row_sum, (i,)), (row_max, (x,)), (centered, (x,)),
                (biased, (x3, b)), (times_transposed, (g, w)), (row_times_transposed, (g, w)),
                (times_plain, (g,)), (conv, (img, k)), (conv_input_dilated, (img, k)),
                (conv_input_dilated_9x, (img, k)), (grouped_conv, (img, k)),
                (depthwise_conv, (img, k)), (conv_weight_grad, (img, k)),
                (head_scores, (hq, hk)), (padded, (x,))]:
  want = np.asarray(jax.jit(f)(*jax.device_put(args, cpu)))
  g = jax.jit(f)
  for _ in range(2):  # the first call traces, the second replays
    got = np.asarray(g(*jax.device_put(args, mlx)))
  if got.dtype.kind == "f":  # GPU reductions may sum in another order; CUDA's cos is not glibc's
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f.__name__)
  else:
    np.testing.assert_array_equal(got, want, err_msg=f.__name__)
"""


def run_child(code: str, env: dict[str, str], timeout: int = 300) -> None:
  """Runs `code` in a child Python with `env` (the variables are read when programs compile
  and when the plugin starts); the child must succeed."""
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                     timeout=timeout)
  assert r.returncode == 0, r.stderr[-3000:]


def graph_stats(tmp_path, mode: str) -> dict[str, collections.Counter]:
  """Program name -> primitive counts of its last run, from a child process."""
  log = tmp_path / "stats.log"
  # Without the CPU's elementwise fusion (tests/ops/test_cpu_fusion.py), which would fold these
  # primitives into one: here the lowering's own primitives are counted.
  env = dict(os.environ, JAXMLX_GRAPH_STATS=str(log), JAXMLX_COMPILE=mode, JAXMLX_CPU_FUSION="0")
  run_child(CHILD, env)
  return last_run_counts(log)


@pytest.fixture(scope="module", params=["replay", "0"], ids=["replay", "eager"])
def stats(request, tmp_path_factory):
  return graph_stats(tmp_path_factory.mktemp(f"stats-{request.param}"), request.param)


def test_every_program_is_counted(stats):
  assert set(stats) == {"jit_label_pick_grad", "jit_weight_grad",
                        "jit_row_sum", "jit_int_row_sum", "jit_row_max", "jit_centered",
                        "jit_biased", "jit_times_transposed", "jit_row_times_transposed",
                        "jit_times_plain", "jit_conv", "jit_conv_input_dilated",
                        "jit_conv_input_dilated_9x", "jit_grouped_conv",
                        "jit_depthwise_conv", "jit_conv_weight_grad", "jit_head_scores",
                        "jit_padded"}
  assert all(c["Sum"] == 1 for n, c in stats.items() if "sum" in n), stats


def test_a_label_pick_is_one_kernel_and_its_transpose_elementwise(stats):
  # Batching dims paired in place: MLX's take_along_axis, without the batch coordinates (Arange)
  # or the padding block (Concatenate) of the general gather. Its transpose, one label per row,
  # is a select where the position equals the label (scatter.cc, add_along_axis), which a GPU
  # fuses with the gradient's other terms: no scatter kernel, no zero fill, no Arange.
  c = with_fused_ops(stats["jit_label_pick_grad"])
  assert c["GatherAxis"] == 1 and c["Equal"] == 1, c
  assert c["Gather"] == 0 and c["Arange"] == 0 and c["Concatenate"] == 0, c
  assert c["ScatterAxis_Sum"] == 0 and c["Scatter_Sum"] == 0 and c["AsType"] <= 1, c


def test_a_weight_gradient_is_made_in_the_weights_layout(stats):
  # The transposed product is the product with its operands swapped (passes/transposed_dot.h):
  # the gradient comes out of its matmul row-major, not as a transposed view that an optimizer's
  # elementwise kernels would read through strides. The one transpose left is x's, a matmul
  # operand (MLX's matmul reads it in place).
  c = stats["jit_weight_grad"]
  assert c["Matmul"] == 2 and c["Transpose"] == 1, c


def test_a_product_over_head_views_keeps_its_batch_dims(stats):
  # dot_general over batch dims [b, h] of [b, q, h, d] views: MLX's matmul takes the two batch
  # dims as they are (lower/dot.cc). Merged into one [b*h, q, d] they were a reshape of a strided
  # view, a copy, for each operand, and a reshape of the result.
  c = stats["jit_head_scores"]
  assert c["Matmul"] == 1 and c["Reshape"] == 0, c


def test_sums_from_jaxs_zero_add_no_init(stats):
  # jax's init is a constant 0: a traced program sees it as a placeholder, yet it is known.
  assert stats["jit_row_sum"]["Add"] == 0, stats["jit_row_sum"]
  assert stats["jit_int_row_sum"]["Add"] == 0, stats["jit_int_row_sum"]


def test_max_from_minus_infinity_takes_no_maximum_with_it(stats):
  assert stats["jit_row_max"]["Maximum"] == 0, stats["jit_row_max"]


def test_an_exact_max_reads_its_operand_once(stats):
  # One reduction of int32 keys orders signed zeros and NaN as XLA does (lower/reduce.cc); a max
  # of the floats and another of their bits read the operand twice.
  assert stats["jit_row_max"]["Max"] == 1, stats["jit_row_max"]


def test_keepdims_broadcast_of_a_reduction_reshapes_nothing_back(stats):
  c = stats["jit_centered"]
  assert c["Reshape"] == 0 and c["Squeeze"] == 0 and c["ExpandDims"] == 0, c
  assert c["Subtract"] == 1 and c["Broadcast"] == 1, c


def test_padding_is_one_pad_primitive(stats):
  # MLX's Pad fills and copies in one primitive, where a slice update of a broadcast fill is two
  # (each primitive costs host time per call on a GPU). A convolution's weight gradient pads its
  # input the same way (lower/window_util.cc, pad_edges) on the CPU and on CUDA.
  for name in ["jit_padded", "jit_conv_weight_grad"]:
    c = stats[name]
    assert c["Pad"] >= 1 and c["SliceUpdate"] == 0, (name, c)
  assert stats["jit_padded"]["Broadcast"] == 0, stats["jit_padded"]


def test_bias_onto_trailing_dims_needs_no_reshape(stats):
  c = with_fused_ops(stats["jit_biased"])  # on CUDA the two are one fused kernel
  assert c["Reshape"] == 0, c
  assert c["Add"] == 1 and c["Multiply"] == 1, c


FUSED_CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
x = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64)
f = jax.jit(lambda x: x * 0.5 + 0.25)
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
for _ in range(2):  # the first call traces, the second replays
  got = np.asarray(f(jax.device_put(x, mlx)))
np.testing.assert_array_equal(got, np.asarray(f(jax.device_put(x, cpu))))

def looped(x):  # splats inside replayed loop bodies (their graphs take constants the same way)
  y = jax.lax.fori_loop(0, 7, lambda i, c: c * 0.5 + jnp.sin(c) * 0.25 + 1.0, x)
  return jax.lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 0.75 - 0.125),
                            (0, y))[1] * 2.0
g = jax.jit(looped)
for _ in range(2):
  got = np.asarray(g(jax.device_put(x, mlx)))
np.testing.assert_allclose(got, np.asarray(g(jax.device_put(x, cpu))), rtol=1e-6, atol=1e-6)
"""


def test_splat_constants_are_scalars_of_fused_kernels(tmp_path):
  # With MLX's fusion (JAXMLX_COMPILE=1, Metal's default) each splat constant is broadcast inside
  # the traced graph (runtime/constant_inputs.h), so the broadcast joins the fused kernel and
  # the kernel reads one scalar. Made outside, a broadcast constant is a full-shape input that
  # the kernel indexes through zero strides, element by element.
  log = tmp_path / "stats.log"
  # JAXMLX_UNROLL=0: the loops stay loops, whose bodies are replayed graphs of their own.
  env = dict(os.environ, JAXMLX_GRAPH_STATS=str(log), JAXMLX_COMPILE="1", JAXMLX_UNROLL="0")
  run_child(FUSED_CHILD, env)
  lines = log.read_text().splitlines()
  runs = [ln.split() for ln in lines if ln.startswith("run jit__lambda ")]
  assert runs and all(run[3:] == ["CompiledBroadcastMultiplyBroadcastAdd=1"] for run in runs), runs
  assert lines.count("region jit_looped replayed") == 2, lines


GPU_FUSED_CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
rng = np.random.default_rng(3)
x = rng.standard_normal((4, 16, 64)).astype(np.float32)
p, g, m = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(3))
v = m * m

def norm(x):  # a layer norm's: 1 / 64 and eps broadcast to [4, 16, 1], read by its kernels
  c = x - x.mean(-1, keepdims=True)
  return c * jax.lax.rsqrt((c * c).mean(-1, keepdims=True) + 1e-5)

def step(x, p, g, m, v):
  affine = x * 0.5 + 0.25
  m = 0.9 * m + 0.1 * g  # an adam update: splats and four arrays of the kernel's shape
  v = 0.999 * v + 0.001 * g * g
  normed = jax.grad(lambda x: jnp.sum(norm(norm(x) @ p) * x))(x)  # shares them between layers
  return affine, normed, p - 1e-3 * (m / 0.19) / (jnp.sqrt(v / 0.0199) + 1e-8), m, v

f = jax.jit(step)
for _ in range(2):  # the first call traces, the second replays
  got = f(*jax.device_put((x, p, g, m, v), mlx))
want = f(*jax.device_put((x, p, g, m, v), cpu))
for a, b in zip(got, want):
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-6, atol=2e-6)
"""


def dot_graph(text: str) -> tuple[dict[str, tuple[str, list[str]]], dict[str, str], set[str]]:
  """A JAXMLX_GRAPH_DOT graph (MLX's export_to_dot, arrays named "a12 float32[64,1]"): each
  primitive node's id -> (its name, the arrays it reads); each array a node makes -> that
  node's id; and the arrays no node makes (arguments, constants)."""
  nodes = {n: (name, []) for n, name in re.findall(r'\{ (\d+) \[label ="([^"]*)"', text)}
  for a, n in re.findall(r'^"([^"]*)" -> (\d+)$', text, re.M):
    nodes[n][1].append(a)
  made_by = {a: n for n, a in re.findall(r'^(\d+) -> "([^"]*)"$', text, re.M)}
  return nodes, made_by, set(re.findall(r'"(a\d+ [^"]*)"', text)) - made_by.keys()


def test_splat_constants_are_scalars_of_our_gpu_kernels(tmp_path):
  # Under our GPU fusion (replayed graphs, CUDA's default; JAXMLX_GPU_FUSION=1 on MLX's CPU) a
  # fused kernel reads each splat constant as a scalar too, shared broadcasts of one included:
  # MLX runs a kernel with a full-shape input read through zero strides on its strided
  # variant, an index computation per element and input, without vectorized loads (all of a
  # transformer step's adam kernels on the H200: bench/README.md, "The issue's sizes on the
  # H200 again").
  dot = tmp_path / "graph.dot"
  env = dict(os.environ, JAXMLX_GRAPH_DOT=str(dot), JAXMLX_COMPILE="replay",
             JAXMLX_GPU_FUSION="1")
  run_child(GPU_FUSED_CHILD, env, timeout=600)
  nodes, made_by, sources = dot_graph(dot.read_text())
  kernels = [ins for name, ins in nodes.values() if name.startswith("Compiled")]
  assert len(kernels) >= 3, nodes  # the affine map, the norm, the adam update
  for ins in kernels:
    # Inputs of the kernel's shape that no node makes are arguments: at most p, g, m and v.
    full_sources = [a for a in ins if a in sources and not a.endswith("[]")]
    assert len(full_sources) <= 4, ins
    for a in ins:  # and no broadcast of a splat's scalar
      if a in made_by and nodes[made_by[a]][0] == "Broadcast":
        assert not all(b.endswith("[]") and b in sources for b in nodes[made_by[a]][1]), ins
  # Each distinct splat is one scalar input: the adam kernel reads p, g, m, v and seven scalars
  # (0.001 and 1e-3 are one constant input).
  adam = max(kernels, key=lambda ins: sum(a.endswith("[]") for a in ins))
  assert sum(a.endswith("[]") for a in adam) == 7 and len(adam) == 11, adam


def test_scalars_moved_to_gpu_memory_keep_their_values():
  # JAXMLX_DEVICE_SCALARS (CUDA's default; runtime/device_scalars.h), here on MLX's CPU with
  # CUDA's fusion: the constants of at most 8 bytes that the replayed graph is given and the
  # scalars its trace made are read from copies (MLX's pool of small buffers is host memory that
  # CUDA kernels read over the bus: 3x the time of a layer norm's kernel on the H200).
  env = dict(os.environ, JAXMLX_COMPILE="replay", JAXMLX_GPU_FUSION="1",
             JAXMLX_DEVICE_SCALARS="1")
  run_child(GPU_FUSED_CHILD, env, timeout=600)


# MLX's CPU passes a transposed rhs to BLAS as it is, which the reference BLAS of its Linux
# wheels multiplies 2x slower than a row-major one (src/lower/util.h, row_major_rhs_pays).
def test_a_transposed_rhs_is_copied_row_major_on_the_cpu(stats, on_mlx_cpu):
  assert stats["jit_times_transposed"]["Contiguous"] == 1, stats["jit_times_transposed"]
  assert stats["jit_times_transposed"]["Matmul"] == 1, stats["jit_times_transposed"]


def test_a_single_row_keeps_the_transposed_rhs(stats, on_mlx_cpu):
  # One row of lhs: the copy would cost more than the slower product (decode's scores).
  assert stats["jit_row_times_transposed"]["Contiguous"] == 0, stats["jit_row_times_transposed"]


def test_a_row_major_rhs_is_not_copied(stats):
  # g.T @ g: a transposed lhs is fine for BLAS, the rhs is the parameter as it is.
  assert stats["jit_times_plain"]["Contiguous"] == 0, stats["jit_times_plain"]


@pytest.mark.parametrize("name", ["jit_conv", "jit_grouped_conv"])
def test_convolutions_are_patch_matmuls_on_the_cpu(stats, name, on_mlx_cpu):
  # MLX's CPU convolution multiplies by its kernel transposed, and loops naively over feature
  # groups and dilated inputs: src/lower/convolution.cc, patch_matmul_conv.
  assert stats[name]["Convolution"] == 0 and stats[name]["Matmul"] == 1, stats[name]
  assert stats[name]["AsStrided"] == 1, stats[name]


def test_a_convolutions_weight_gradient_transposes_nothing_on_the_cpu(stats, on_mlx_cpu):
  # jax's kernel gradient convolves x read as [C, H, W, N] by dy read as [O, H, W, N] into
  # [H, W, I, O]. The patch matmul reads x through its strides as it lies, takes dy as it lies as
  # its [N * H * W, O] matrix, and makes its rows in the result's order; the forward kernel
  # (HWIO) is the [H * W * I, O] matrix as it lies. The one transpose left is the patches': copied
  # as [N * H' * W', H * W * I] along x's features, and multiplied transposed in place. Six
  # Transpose nodes before (MLX keeps one per call, even where two cancel).
  c = stats["jit_conv_weight_grad"]
  assert c["Matmul"] == 2 and c["AsStrided"] == 2 and c["Transpose"] == 1, c


def test_depthwise_convolutions_are_sums_of_shifted_inputs_on_the_cpu(stats, on_mlx_cpu):
  c = stats["jit_depthwise_conv"]  # a 3x3 kernel: nine shifted views, no patches, no matmul
  assert c["Convolution"] == 0 and c["Matmul"] == 0 and c["AsStrided"] == 9, c


@pytest.mark.parametrize("name,phases", [("jit_conv_input_dilated", 4),
                                         ("jit_conv_input_dilated_9x", 9)])
def test_dilated_inputs_are_patch_matmuls_per_output_phase_on_the_cpu(stats, name, phases,
                                                                      on_mlx_cpu):
  # One undilated convolution per output phase, written into the result by a strided update
  # (src/lower/convolution.cc, phase_conv): nothing multiplies the dilated input's zeros, and a
  # 9x dilation no longer falls back to MLX's naive loop.
  c = stats[name]
  assert c["Convolution"] == 0 and c["Matmul"] == phases and c["SliceUpdate"] >= phases, c


@pytest.mark.parametrize("name", ["jit_conv_input_dilated", "jit_conv_input_dilated_9x"])
def test_dilated_inputs_are_one_convolution_on_cuda(stats, name, on_mlx_cuda):
  # On CUDA an output phase is a cuDNN call of its own with its input cropped: resnet_train's
  # full-size step took 11.1 ms with phases, 8.06 without (native MLX 8.04; bench/README, "Phases
  # off on CUDA"). The input is dilated explicitly and convolved by one call (phases: one each).
  c = stats[name]
  assert c["Convolution"] == 1, c



REVERSED_KERNEL_CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
rng = np.random.default_rng(0)
x = rng.integers(-4, 5, (2, 6, 6, 4)).astype(np.float32)
w = rng.integers(-4, 5, (3, 3, 4, 6)).astype(np.float32)
c = rng.integers(-4, 5, (2, 6, 6, 6)).astype(np.float32)
def input_grad(x, w, c):
  conv = lambda a: jax.lax.conv_general_dilated(a, w, (1, 1), "SAME",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))
  return jax.grad(lambda a: jnp.sum(conv(a) * c))(x)
want = np.asarray(jax.jit(input_grad)(*jax.device_put((x, w, c), cpu)))
got = np.asarray(jax.jit(input_grad)(*jax.device_put((x, w, c), mlx)))
np.testing.assert_array_equal(got, want)
"""


def test_a_reversed_kernel_is_the_convolutions_flip(tmp_path):
  # jax's input gradient convolves with reverse(w) over the kernel's spatial dims; that reverse
  # becomes the convolution's window reversal (passes/reversed_kernel.h) and MLX's convolution
  # its `flip` (as on a GPU, here with the CPU's patch matmuls off): no reversed view of the
  # kernel (a Slice, which on CUDA was copied by a gather first) is left in the graph.
  log = tmp_path / "stats.log"
  run_child(REVERSED_KERNEL_CHILD, dict(os.environ, JAXMLX_GRAPH_STATS=str(log),
                                        JAXMLX_CONV_PATCHES="0", JAXMLX_CPU_FUSION="0"))
  c = last_run_counts(log)["jit_input_grad"]
  assert c["Convolution"] == 1 and c["Slice"] == 0 and c["Gather"] == 0, c


SHARED_KERNEL_CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
rng = np.random.default_rng(0)
x = rng.integers(-4, 5, (2, 6, 6, 4)).astype(np.float32)
w = rng.integers(-4, 5, (3, 3, 4, 6)).astype(np.float32)
def conv(a, b):
  return jax.lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))
def train_grads(x, w):  # the forward, the input gradient (flipped) and the weight gradient
  return jax.grad(lambda a, b: jnp.sum(conv(a, b) ** 2), argnums=(0, 1))(x, w)
want = jax.jit(train_grads)(*jax.device_put((x, w), cpu))
g = jax.jit(train_grads)
for _ in range(2):
  got = g(*jax.device_put((x, w), mlx))
for a, b in zip(got, want):
  np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
"""


def test_a_kernel_is_copied_once_for_both_its_convolutions(tmp_path):
  # As on CUDA (JAXMLX_CONV_PATCHES=gpu): the HWIO kernel is one explicit copy in MLX's forward
  # order [O, H, W, I], which the forward convolution reads as it lies and the flipped input
  # gradient as a swapped view (convolution.cc, cuda_kernel), where MLX's CUDA convolution would
  # copy the transposed kernel inside each of them. Replayed, the two convolutions' copies are
  # one; eagerly each makes its own. (Other copies, the same either way: on the CPU the weight
  # gradient's matmul reads its patches row-major, util.h row_major_rhs_pays.)
  counts = {}
  for mode in ("replay", "0"):
    log = tmp_path / f"stats-{mode}.log"
    run_child(SHARED_KERNEL_CHILD, dict(os.environ, JAXMLX_GRAPH_STATS=str(log),
                                        JAXMLX_COMPILE=mode, JAXMLX_CONV_PATCHES="gpu",
                                        JAXMLX_CPU_FUSION="0"))
    counts[mode] = last_run_counts(log)["jit_train_grads"]
  replayed, eager = counts["replay"], counts["0"]
  assert replayed["Convolution"] == 2 and eager["Convolution"] == 2, counts
  assert eager["Contiguous"] - replayed["Contiguous"] == 1, counts


DILATION_KEYS_CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
rng = np.random.default_rng(0)
def flipped(dil, name, pad=(1, 2)):  # jax's input-gradient form: a reversed kernel, a dilation
  def f(x, w):
    return jax.lax.conv_general_dilated(x, jnp.flip(w, (0, 1)), (1, 1), (pad, pad),
                                        lhs_dilation=dil,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))
  f.__name__ = name
  return f
def input_grad(x, w, c):  # of a strided convolution: only its input gradient (linear in x)
  conv = lambda a: jax.lax.conv_general_dilated(a, w, (2, 2), ((1, 1), (1, 1)),
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))
  return jax.grad(lambda a: jnp.sum(conv(a) * c))(x)
x = rng.integers(-4, 5, (2, 5, 6, 3)).astype(np.float32)
w = rng.integers(-4, 5, (3, 3, 3, 4)).astype(np.float32)
programs = [(flipped(d, n), (x, w)) for d, n in [((2, 2), "first_2x2"), ((3, 2), "then_3x2"),
                                                  ((1, 1), "then_1x1"), ((2, 2), "again_2x2")]]
programs.append((flipped((2, 2), "asymmetric", pad=(2, 1)), (x, w)))  # SAME's kind of padding
programs.append((input_grad, (rng.integers(-4, 5, (2, 9, 8, 4)).astype(np.float32),
                              rng.integers(-4, 5, (3, 3, 4, 5)).astype(np.float32),
                              rng.integers(-4, 5, (2, 5, 4, 5)).astype(np.float32))))
for f, args in programs:
  want = np.asarray(jax.jit(f)(*jax.device_put(args, cpu)))
  got = np.asarray(jax.jit(f)(*jax.device_put(args, mlx)))
  np.testing.assert_array_equal(got, want, err_msg=f.__name__)
"""


def test_mlx_dilates_an_input_only_under_a_key_of_its_own(tmp_path):
  # MLX's CUDA convolution caches a cuDNN graph by a key without the input dilation; a process
  # record of the keys we hand it (conv_cache_keys.h) lets MLX dilate an input where the key is
  # first claimed with that dilation (convolution.cc, mlx_may_dilate): here the first 2x2, again
  # under the same key, and jax's input gradient of a strided convolution. Under the same key
  # with (3, 2) the input is dilated explicitly (a fill and a strided copy), and an undilated
  # convolution is padded explicitly (a key without padding, which no dilated one claims). Padding
  # lo 2, hi 1 is no data gradient MLX builds (it pads both sides alike): dilated explicitly.
  # JAXMLX_CONV_PATCHES=gpu keeps the record on the CPU, whose convolutions are right either way;
  # on CUDA the values would show a shared graph.
  log = tmp_path / "stats.log"
  run_child(DILATION_KEYS_CHILD, dict(os.environ, JAXMLX_GRAPH_STATS=str(log),
                                      JAXMLX_CONV_PATCHES="gpu", JAXMLX_CONV_PHASES="0",
                                      JAXMLX_CPU_FUSION="0"))
  counts = last_run_counts(log)
  explicit = ("Pad", "SliceUpdate")
  for name in ("jit_first_2x2", "jit_again_2x2", "jit_input_grad"):
    assert counts[name]["Convolution"] == 1, (name, counts[name])
    assert not any(counts[name][p] for p in explicit + ("Full",)), (name, counts[name])
  for name in ("jit_then_3x2", "jit_asymmetric"):
    assert all(counts[name][p] == 1 for p in explicit), (name, counts[name])
  assert counts["jit_then_1x1"]["Pad"] == 1, counts["jit_then_1x1"]


WEIGHT_GRAD_SIZES_CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
rng = np.random.default_rng(0)
def weight_grad(x, w, c):
  conv = lambda b: jax.lax.conv_general_dilated(x, b, (1, 1), "SAME",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))
  return jax.grad(lambda b: jnp.sum(conv(b) * c))(w)
for n in (8, 16):  # 16 * 9 * 1024 * n patch elements: 1.2M and 2.4M
  x = rng.integers(-4, 5, (n, 32, 32, 16)).astype(np.float32)
  w = rng.integers(-4, 5, (3, 3, 16, 16)).astype(np.float32)
  c = rng.integers(-4, 5, (n, 32, 32, 16)).astype(np.float32)
  def large_weight_grad(*a): return weight_grad(*a)
  g = jax.jit(weight_grad if n == 8 else large_weight_grad)  # programs named by size
  want = np.asarray(jax.jit(weight_grad)(*jax.device_put((x, w, c), cpu)))
  got = np.asarray(g(*jax.device_put((x, w, c), mlx)))
  np.testing.assert_array_equal(got, want)
"""


def test_a_gpus_weight_gradients_are_patch_matmuls_up_to_a_size(tmp_path):
  # JAXMLX_CONV_PATCHES=gpu: as on a GPU, a stride-1 convolution's weight gradient is a patch
  # matmul up to 2^21 patch elements, MLX's convolution (cuDNN's on CUDA) above
  # (convolution.cc, kMaxUndilatedGpuPatchElements). The loss is linear in w: jax leaves the
  # forward convolution out.
  log = tmp_path / "stats.log"
  run_child(WEIGHT_GRAD_SIZES_CHILD, dict(os.environ, JAXMLX_GRAPH_STATS=str(log),
                                          JAXMLX_CONV_PATCHES="gpu", JAXMLX_CPU_FUSION="0"))
  counts = last_run_counts(log)
  small, large = counts["jit_weight_grad"], counts["jit_large_weight_grad"]
  assert small["Matmul"] == 1 and small["Convolution"] == 0, small
  assert large["Matmul"] == 0 and large["Convolution"] == 1, large


PROFILED = r"""
import jax, jax.numpy as jnp, numpy as np
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8)
def step(x): return jnp.sin(x) @ x.T + jnp.sum(x, axis=0)
want = np.asarray(jax.jit(step)(jax.device_put(x, cpu)))
g = jax.jit(step)
for _ in range(3):  # traced, replayed, replayed (on the calling thread on MLX's CPU)
  got = np.asarray(g(jax.device_put(x, mlx)))
  np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
"""


@pytest.mark.parametrize("mode", ["replay", "0"], ids=["replay", "eager"])
def test_profile_evaluates_one_primitive_at_a_time(tmp_path, mode):
  # JAXMLX_PROFILE (bench/profile.py): every run evaluated primitive by primitive, timed; the
  # values stay right and each line's total is the sum of its primitives' times.
  log = tmp_path / "profile.log"
  env = dict(os.environ, JAXMLX_PROFILE=str(log), JAXMLX_COMPILE=mode)
  run_child(PROFILED, env)
  runs = [ln.split() for ln in log.read_text().splitlines() if " jit_step " in ln]
  assert len(runs) == 3, log.read_text()
  for _, _, total, *kvs in runs:
    parts = {k: v.split(":") for k, v in (kv.rsplit("=", 1) for kv in kvs)}
    assert "Sin" in parts and "Matmul" in parts and "Sum" in parts, parts
    assert all(int(n) >= 1 and float(us) >= 0 for n, us in parts.values()), parts
    assert abs(sum(float(us) for _, us in parts.values()) - float(total)) < 0.1 * len(parts), kvs


LOOPS = r"""
import jax, jax.numpy as jnp, numpy as np
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
q = np.linspace(-1, 1, 2 * 4 * 64, dtype=np.float32).reshape(1, 2, 4, 64)

def langevin(key, x):  # jax.random's sampler: exact FMAs (passes/contract_fma.h)
  def body(i, c):
    key, x = c
    key, sub = jax.random.split(key)
    return key, x - 0.01 * x + 0.1 * jax.random.normal(sub, x.shape)
  return jax.lax.fori_loop(0, 5, body, (key, x))[1]

def argmax_softmax(x):  # recognized argmax and softmax
  def body(i, x):
    return jax.nn.softmax(x, axis=-1) + jnp.argmax(x, axis=-1)[:, None].astype(x.dtype)
  return jax.lax.fori_loop(0, 3, body, x)

def attention(q):  # recognized attention (JAXMLX_FAST_KERNELS=1)
  def body(i, q):
    s = (q @ q.transpose(0, 1, 3, 2)) * 0.125
    return jax.nn.softmax(s, axis=-1) @ q
  return jax.lax.fori_loop(0, 2, body, q)

def printing(x):  # a host callback: interpreted
  def body(i, x):
    jax.debug.print("{}", i)
    return x * 2.0
  return jax.lax.fori_loop(0, 2, body, x)

cases = [(langevin, (jax.random.key(0), x), 2e-6), (argmax_softmax, (x,), 2e-6),
         (attention, (q,), 2e-6), (printing, (x,), 0)]
for f, args, tol in cases:
  want = np.asarray(jax.jit(f)(*jax.device_put(args, cpu)))
  for _ in range(2):
    got = np.asarray(jax.jit(f)(*jax.device_put(args, mlx)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f.__name__)
"""


@pytest.mark.parametrize("mode", ["replay", "1"], ids=["replay", "fused"])
def test_loop_bodies_with_our_own_calls_are_replayed(tmp_path, mode):
  # A loop body is traced once and replayed unless it holds something a trace cannot (nested
  # control flow, a host callback); the custom calls our own passes make (passes/value_calls.h)
  # are plain MLX graphs. A sampler's exact FMAs inside a fori_loop made each iteration
  # interpreted again: 5x slower than replay (bench/README.md, "Loops").
  log = tmp_path / "stats.log"
  # JAXMLX_UNROLL=0: these counted loops stay loops (unrolled, they would be no region at all).
  env = dict(os.environ, JAXMLX_GRAPH_STATS=str(log), JAXMLX_COMPILE=mode,
             JAXMLX_FAST_KERNELS="1", JAXMLX_UNROLL="0")
  run_child(LOOPS, env, timeout=600)
  regions = collections.defaultdict(list)
  for line in log.read_text().splitlines():
    if line.startswith("region "):
      _, name, *verdict = line.split(maxsplit=2)
      regions[name].append(" ".join(verdict))
  for name in ("jit_langevin", "jit_argmax_softmax", "jit_attention"):
    assert regions[name] and all(v == "replayed" for v in regions[name]), (name, regions)
  # The printing loop's body holds the callback (a counted loop's condition is never run).
  assert regions["jit_printing"] == ["interpreted custom_call @jaxmlx.host_callback"], regions


THREEFRY = r"""
import jax, jax.numpy as jnp, numpy as np
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
def dropout_mask(key): return jax.random.bernoulli(key, 0.9, (64, 33))
def split_fold(key): return jax.random.key_data(jax.random.fold_in(jax.random.split(key, 5)[3], 7))
def batched_normal(key):  # vmap batches the keys: u32[4,1,1] beside counters u32[1,7,3]
  return jax.vmap(lambda k: jax.random.normal(k, (7, 3)))(jax.random.split(key, 4))
for f in (dropout_mask, split_fold, batched_normal):
  want = np.asarray(jax.jit(f)(jax.device_put(jax.random.key(42), cpu)))
  for _ in range(2):  # the first call traces, the second replays
    got = np.asarray(jax.jit(f)(jax.device_put(jax.random.key(42), mlx)))
  np.testing.assert_array_equal(got, want, err_msg=f.__name__)
"""


def threefry_counts(log, **env) -> dict[str, collections.Counter]:
  """Program name -> primitive counts of its last run of THREEFRY, in a child with `env`."""
  env = dict(os.environ, JAXMLX_GRAPH_STATS=str(log), **env)
  run_child(THREEFRY, env)
  return last_run_counts(log)


def test_threefry_is_one_primitive_on_the_cpu(tmp_path, on_mlx_cpu):
  # jax's threefry2x32 func (~180 u32 ops per draw, split and fold_in) is one Threefry2x32
  # primitive on MLX's CPU (passes/threefry.h), and its bits stay jax's CPU backend's.
  last = threefry_counts(tmp_path / "stats.log", JAXMLX_CPU_FUSION="0")
  assert last["jit_dropout_mask"]["Threefry2x32"] == 1, last["jit_dropout_mask"]
  # The key's two words are read in place: no slice or reshape unpacks them.
  assert last["jit_dropout_mask"]["Slice"] == 0, last["jit_dropout_mask"]
  assert last["jit_split_fold"]["Threefry2x32"] == 2, last["jit_split_fold"]
  assert last["jit_batched_normal"]["Threefry2x32"] == 2, last["jit_batched_normal"]
  for c in last.values():
    assert c["LeftShift"] == 0 and c["BitwiseXor"] <= 1, c


def test_threefry_and_exact_fma_are_one_kernel_each_on_cuda(tmp_path, on_mlx_cuda):
  # On MLX's CUDA backend threefry (~160 MLX ops) and the samplers' exact FMAs (~45 each) are one
  # kernel of ours each (lower/cuda_kernels.h), with jax's CPU backend's bits. JAXMLX_CUDA_KERNELS=0
  # gives the MLX ops back.
  on = threefry_counts(tmp_path / "on.log", JAXMLX_CUDA_KERNELS="1")
  off = threefry_counts(tmp_path / "off.log", JAXMLX_CUDA_KERNELS="0")
  # The mask: one threefry and uniform's contracted (max - min) * u + min.
  assert on["jit_dropout_mask"]["CustomKernel"] == 2, on["jit_dropout_mask"]
  assert on["jit_split_fold"]["CustomKernel"] == 2, on["jit_split_fold"]
  # Two threefry draws and the normal sampler's 31 contracted multiply-adds (erf_inv's
  # polynomials: 31 Fma primitives on the CPU).
  assert on["jit_batched_normal"]["CustomKernel"] == 33, on["jit_batched_normal"]
  for name, c in on.items():
    # No rotation is left, nor the emulated FMA's bit-mask split (one per FMA; the sampler
    # itself has one BitwiseAnd).
    assert c["LeftShift"] == 0 and c["BitwiseAnd"] <= 1, (name, c)
    assert sum(c.values()) < sum(off[name].values()) / 3, (name, c, off[name])
  assert all(c["CustomKernel"] == 0 for c in off.values()), off


DOT_CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
f = jax.jit(lambda x, y: jnp.sin(x) * 2.0 + y.sum(0))
x, y = jax.device_put((np.ones((3, 4), np.float32), np.ones((5, 4), np.float32)),
                      jax.devices("mlx")[0])
for _ in range(2):
  np.asarray(f(x, y))
"""


def test_graph_dot_names_each_arrays_dtype_and_shape(tmp_path):
  # JAXMLX_GRAPH_DOT: the last run's graph as Graphviz, each array named by a serial number,
  # its dtype and its shape, each primitive a rectangle.
  dot = tmp_path / "g.dot"
  env = dict(os.environ, JAXMLX_GRAPH_DOT=str(dot), JAXMLX_COMPILE="replay",
             JAXMLX_CPU_FUSION="0", JAXMLX_GPU_FUSION="0")  # the primitives as lowered
  run_child(DOT_CHILD, env)
  text = dot.read_text()
  assert text.startswith("digraph"), text[:200]
  for label in ("Sin", "Sum", "Multiply", "Add"):
    assert f'label ="{label}"' in text, (label, text)
  for shape in ("float32[3,4]", "float32[5,4]", "float32[1,4]"):
    assert shape in text, (shape, text)


VIEWS_CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
rng = np.random.default_rng(0)
x, dy = rng.standard_normal((4, 6, 8), np.float32), rng.standard_normal((4, 6, 5), np.float32)
h, w = rng.standard_normal((2, 3, 4, 8), np.float32), rng.standard_normal((24, 5), np.float32)
def weight_grad(x, dy): return jnp.einsum("bsd,bsf->df", x, dy)
def merged_heads(h, w):
  o = h.transpose(0, 2, 1, 3).reshape(2, 4, 24)
  return o, o @ w
f = {"weight_grad": (weight_grad, (x, dy)), "merged_heads": (merged_heads, (h, w))}[CASE]
want = jax.jit(f[0])(*jax.device_put(f[1], cpu))
for _ in range(2):
  got = jax.jit(f[0])(*jax.device_put(f[1], mlx))
for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
  np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=2e-5, atol=2e-5)
"""


def reshapes_of_transposes(dot_text: str) -> int:
  """How many Reshape primitives of a JAXMLX_GRAPH_DOT graph read a Transpose's result."""
  nodes, made_by, _ = dot_graph(dot_text)
  return sum(name == "Reshape" and a in made_by and nodes[made_by[a]][0] == "Transpose"
             for name, reads in nodes.values() for a in reads)


@pytest.mark.parametrize("case,copies", [("weight_grad", 0), ("merged_heads", 1)])
def test_matmul_operands_are_reshaped_before_they_are_transposed(tmp_path, case, copies):
  # A reshape that merges a transposed view's dims is a copy. jax's weight gradient X^T dY
  # (X [B, S, D], contracting B and S) reshapes X as it lies and transposes that view, which
  # MLX's matmul reads as a transposed operand: no copy (lower/dot.cc, swapped_matrix).
  # Attention's heads merged back ([B, H, S, Dh] -> [B, S, H * Dh]) are a copy, made once: the
  # matmul's [B * S, D] operand is a view of it (lower/shape_util.h, reshape_view).
  dot = tmp_path / "g.dot"
  env = dict(os.environ, JAXMLX_GRAPH_DOT=str(dot), JAXMLX_COMPILE="replay")
  run_child(VIEWS_CHILD.replace("CASE", repr(case)), env)
  text = dot.read_text()
  assert 'label ="Matmul"' in text, text
  assert reshapes_of_transposes(text) == copies, text


HEADS_CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
from jax import lax
mlx, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
rng = np.random.default_rng(0)
x = rng.integers(-4, 5, (1, 1, 96)).astype(np.float32)
kc, vc = (rng.integers(-4, 5, (1, 4, 6, 8)).astype(np.float32) for _ in range(2))
def decode_attention(x, kc, vc, pos):  # bench/workloads/decode.py's step, one token, batch 1
  q, k, v = (t.reshape(1, 1, 4, 8).transpose(0, 2, 1, 3) for t in jnp.split(x, 3, axis=-1))
  kc = lax.dynamic_update_slice_in_dim(kc, k, pos, axis=2)
  vc = lax.dynamic_update_slice_in_dim(vc, v, pos, axis=2)
  s = jnp.where(jnp.arange(6) <= pos, (q @ kc.transpose(0, 1, 3, 2)) * 8 ** -0.5, -1e30)
  o = jax.nn.softmax(s, axis=-1) @ vc
  return o.transpose(0, 2, 1, 3).reshape(1, 1, 32), kc, vc
def one_token_scores(x, kc, vc, pos):  # the same product, no attention to recognize
  return x[..., :32].reshape(1, 1, 4, 8).transpose(0, 2, 1, 3) @ kc.transpose(0, 1, 3, 2)
for f in (decode_attention, one_token_scores):
  args = (x, kc, vc, np.int32(3))
  want = jax.jit(f)(*jax.device_put(args, cpu))
  for _ in range(2):
    got = jax.jit(f)(*jax.device_put(args, mlx))
  for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-5)
"""


@pytest.mark.parametrize("mode", ["replay", "0"], ids=["replay", "eager"])
def test_heads_of_one_token_are_views_of_the_projection_and_the_cache(tmp_path, mode):
  # A decode step's operands are chains of views that only move size-1 dims: the heads'
  # reshape and transpose, jnp.matmul's [1, H, 1, D] -> [H, 1, D] and back, the attention rule's
  # [B, N, T, D]. Each reaches MLX as one view of the projection or the cache, or as the cache
  # itself (lower/shape_util.h, permuted_view; a reshape of the projection's slice that only
  # splits its dims, only_splits): the one transpose left is k^T of the scores. Before, each
  # hop was an MLX node: 7 transposes and 14 reshapes in the attention's graph.
  log = tmp_path / "stats.log"
  # CUDA's device scalars are read through reshapes of their copies (runtime/device_scalars.h):
  # 4 more there, none of them an operand's.
  env = dict(os.environ, JAXMLX_GRAPH_STATS=str(log), JAXMLX_COMPILE=mode,
             JAXMLX_CPU_FUSION="0", JAXMLX_FAST_KERNELS="1", JAXMLX_DEVICE_SCALARS="0")
  run_child(HEADS_CHILD, env)
  runs = last_run_counts(log)
  # Raw counts: a GPU's fused kernels take reshapes in (a Transpose never).
  att, scores = runs["jit_decode_attention"], runs["jit_one_token_scores"]
  # Eager, the two cache writes clamp `pos` each (a reshape each); replay merges them.
  assert att["Transpose"] == 1 and att["Reshape"] <= (6 if mode == "replay" else 7), att
  assert scores["Transpose"] == 1 and scores["Reshape"] <= 3, scores


HOST_TIMES_CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
f = jax.jit(lambda x: jnp.sin(x) * 2.0 + 1.0)
x = jax.device_put(np.ones((8, 8), np.float32), jax.devices("mlx")[0])
for _ in range(128):
  x = f(x)
x.block_until_ready()
"""


def test_host_times_count_and_time_each_phase(tmp_path):
  # JAXMLX_HOST_TIMES: each time a phase has been timed 64 times, a line of every phase's count,
  # mean µs and mean µs of its last 64 timings; the runtime's part of an Execute is nested in it, the graph's build and issue
  # in the run (made on this thread or the worker's). Lines come from whichever thread a phase
  # ends on, so each phase is read from the line its own 128th timing wrote.
  log = tmp_path / "times.txt"
  run_child(HOST_TIMES_CHILD, dict(os.environ, JAXMLX_HOST_TIMES=str(log)))
  lines = log.read_text().splitlines()
  assert lines and all(line.startswith("host_times ") for line in lines), lines
  parsed = [{k: v.split(":") for k, v in (kv.split("=") for kv in line.split()[1:])}
            for line in lines]
  assert all(set(p) == {"execute", "runtime", "run", "issue"} for p in parsed), lines
  own = {k: max((p[k] for p in parsed), key=lambda v: int(v[0])) for k in parsed[0]}
  calls = {k: int(v[0]) for k, v in own.items()}
  mean = {k: float(v[1]) for k, v in own.items()}
  recent = {k: float(v[2]) for k, v in own.items()}
  assert calls == dict.fromkeys(calls, 128), lines
  assert mean["execute"] >= mean["runtime"] >= 0 and mean["run"] > 0 and mean["issue"] > 0, lines
  # The first build of the graph (the program's trace) is in the whole mean only.
  assert all(recent[k] > 0 for k in recent) and recent["run"] < mean["run"], lines
