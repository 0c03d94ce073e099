"""Why tests of jax's own suite fail on our platform: (error-message regex, stated cause) pairs.

scripts/jax_suite.py files each failure under the first pattern its message matches. A cause
must say what blocks the test (a platform limit, a documented numeric difference, a jax test that
assumes a CPU/GPU/TPU backend); "not done yet" is not a cause. Keep the most specific first.
"""

CAUSES: list[tuple[str, str]] = [
    (r"f64 compute is not supported|c128 compute is not supported",
     "float64/complex128 compute: MLX has no f64 on GPUs; refused at compile time "
     "(JAX_MLX_F64=downcast opts into f32)"),
    (r"custom call target '[^']*callback",
     "host callback custom call not handled"),
    (r"UNIMPLEMENTED: stablehlo\.(\w+)",
     "an op without a lowering rule (named in the message)"),
]
