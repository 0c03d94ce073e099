"""Why tests of jax's own suite fail on our platform: (error-message regex, stated cause) pairs.

scripts/jax_suite.py files each failure under the first pattern its message matches. A cause
must say what blocks the test (a platform limit, a documented numeric difference, a jax test that
assumes a CPU/GPU/TPU backend, or a named gap with the issue that owns it); a failure no pattern
explains is listed as "unclassified". Keep the most specific first.
"""

CAUSES: list[tuple[str, str]] = [
    # (patterns also match the stored signatures, whose digits are masked as N)
    (r"(f64|c128|complex<f64>|fN|complex<fN>) compute is not supported",
     "float64/complex128 compute: MLX has no f64 on GPUs; refused at compile time "
     "(JAX_MLX_F64=downcast opts into f32)"),
    (r"numpy\.linalg\.pinv",
     "the test's own reference crashes: numpy.linalg.pinv of its 400000 x 2 case segfaults in "
     "numpy's LAPACK on this machine (our pinv of it is tested in tests/ops/test_linalg.py)"),
    (r"exported for platforms .* but it is used on|KeyError: 'mlx'",
     "the test exports for a fixed list of platforms (cpu/tpu/cuda) and calls it on ours"),
    (r"memory kind: pinned_host|memory kinds: device",
     "host memory spaces (pinned_host): the plugin exposes one device memory"),
    (r"not raised",
     "the test expects an error from XLA itself: an invalid XLA compiler option (XLA's compiler "
     "does not run here; the plugin ignores its options, so it cannot reject a bad one), a dtype "
     "XLA:CPU's LAPACK refuses, jaxlib's refusal to read a token buffer"),
    (r"argument of type 'NoneType' is not iterable",
     "the test reads XLA's optimized HLO (compiled.as_text()); the plugin compiles to MLX graphs "
     "and has no HLO to return"),
    (r"worker 'gw\w+' crashed",
     "a pytest worker crashed (see the test)"),
    (r"perturb_singular=True is not supported",
     "tridiagonal_solve(perturb_singular=True), eigh_tridiagonal's eigenvectors by inverse "
     "iteration: jax has kernels for CPU and GPU only (jaxlib's tridiagonal_solve_perturbed) and "
     "refuses the flag elsewhere; our rule (linalg_rules.py) is registered only for a jax that "
     "has lax.linalg._tridiagonal_solve_jax, so this refusal means one without it"),
    (r"^collection failure$",
     "the test module does not import: it needs jax._src.hypothesis_test_util, which the "
     "installed jax wheel does not ship"),
    (r"PJRT_TopologyDescription_Create is not implemented",
     "the test asks for a device topology without a client (ahead-of-time compilation: "
     "PJRT_TopologyDescription_Create), which the plugin does not implement; jax's test skips "
     "only on XLA's wording of that refusal"),
    (r"`EmitPythonCallback` not supported on mlx",
     "the test's own primitive lowers through jax's internal mlir.emit_python_callback, which "
     "jax allows on cpu, cuda, rocm and tpu only (jax's callbacks and checkify have rules of "
     "ours)"),
    (r"`buffer_callback` not supported on mlx",
     "jax.experimental.buffer_callback hands XLA's device buffers to Python; jax refuses it "
     "for backends other than its own CPU and GPU ones"),
    (r"compute_left_eigenvectors=True is not supported",
     "left eigenvectors of eig: MLX computes right ones only; refused at compile time"),
    (r"UnparsedFlagAccessError: Trying to access flag --test_tmpdir",
     "the test reads absl's --test_tmpdir flag, which pytest never parses (jax runs these tests "
     "under bazel); the same under jax's CPU backend"),
    (r"N-dimensional vectors",
     "numpy-side error message differs from the test's expectation (jnp.cross on our device)"),
    (r"UNIMPLEMENTED: stablehlo\.(\w+)",
     "an op without a lowering rule (named in the message)"),
    (r"^AssertionError", "a numeric or structural mismatch (see the test; unclassified)"),
]

# Failures whose message does not say why, by test ("file::id" regex); consulted first.
TEST_CAUSES: list[tuple[str, str]] = [
    (r"memories_test\.py::.*compute_on2_out_mem_space",
     "host memory spaces (pinned_host): the plugin exposes one device memory"),
    (r"shape_poly_test\.py::.*jnp_(insert|nonzero)_",
     "the test expects jax's NotImplementedError for an associative scan over a symbolic dim "
     "on platforms other than CPU and GPU; jax lowers cumsum on ours through reduce_window, "
     "which takes symbolic dims, so the program works"),
    (r"compilation_cache_test\.py::",
     "jax's persistent compilation cache is for tpu, gpu, cpu and neuron only "
     "(compilation_cache.is_cache_used); the test class skips other platforms in setUp after "
     "it has swapped jax's cache object, and the teardown check then fails"),
    (r"logging_test\.py::.*test_subprocess_stderr_(info|debug)_logging",
     "the test expects the INFO lines jax logs for the backends it fails to start (cuda, tpu); "
     "JAX_PLATFORMS names ours and cpu, so none is tried"),
    (r"layout_test\.py::.*test_device_put_user_concrete_layout$",
     "a result asked in a layout other than row-major (device_put to a column-major Format): "
     "the plugin keeps every array row-major and refuses such a result at compile time"),
]
