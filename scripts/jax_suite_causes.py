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
    (r"PJRT_Buffer_UnsafePointer is not implemented",
     "raw device pointers (unsafe_buffer_pointer, zero-copy checks, DLPack): "
     "PJRT_Buffer_UnsafePointer is not provided yet; our buffers are MLX arrays (gap, issue #7)"),
    (r"bitcast_convert \(u?i[24N] bitcast",
     "bitcast of int2/int4/uint2/uint4: stored one value per byte, their packed layout is not "
     "reproduced (gap)"),
    (r"f8E|f4E|fNENMNFN|f8e|float8",
     "float8 compute inside a sort comparator or reduce_window body: the narrow-type emulation "
     "layer is not applied to region bodies yet (gap, issue #5)"),
    (r"boolean convolution",
     "convolution of bool operands: XLA defines it as or-of-and; not lowered (gap, issue #5)"),
    (r"stablehlo\.convolution at .*\[conv\]",
     "MLX's conv_general rejects a zero-spatial-dimension (0-D) convolution (gap, issue #5)"),
    (r"the lowering of stablehlo\.(maximum|minimum) at jit\(reduce_window\)",
     "reduce_window whose body reads a value captured from outside the region (gap, issue #5)"),
    (r"custom call target 'dce_sink'",
     "jax's dce_sink custom call (a test-only XLA feature) is not provided"),
    (r"numpy\.linalg\.pinv",
     "the test's own reference crashes: numpy.linalg.pinv of its 400000 x 2 case segfaults in "
     "numpy's LAPACK on this machine (our pinv of it is tested in tests/ops/test_linalg.py)"),
    (r"triangular inversion failed|worker 'gw\w+' crashed",
     "MLX CPU linalg on a singular input: MLX throws (or aborts) where LAPACK returns inf/NaN "
     "(gap, issue #7: never crash)"),
    (r"exported for platforms .* but it is used on|KeyError: 'mlx'",
     "the test exports for a fixed list of platforms (cpu/tpu/cuda) and calls it on ours"),
    (r"memory kind: pinned_host|memory kinds: device",
     "host memory spaces (pinned_host): the plugin exposes one device memory"),
    (r"not raised",
     "the test expects an error XLA raises (an invalid compiler option, double donation, a dtype "
     "XLA:CPU refuses) and we accept the input"),
    (r"N-dimensional vectors",
     "numpy-side error message differs from the test's expectation (jnp.cross on our device)"),
    (r"UNIMPLEMENTED: stablehlo\.(\w+)",
     "an op without a lowering rule (named in the message)"),
    (r"^AssertionError", "a numeric or structural mismatch (see the test; unclassified)"),
]
