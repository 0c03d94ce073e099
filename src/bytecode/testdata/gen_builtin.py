# Regenerates builtin_v{0..6}.mlirbc: one module exercising every builtin attribute/type
# encoding, written by jaxlib's MLIR at each bytecode version. Run from this directory:
#   ../../../.venv/bin/python gen_builtin.py
import io
from jaxlib.mlir import ir
TEXT = r'''
#loc1 = loc("model.py":42:7)
#loc2 = loc("lib.py":3:1)
module @m attributes {test.unit} {
  "test.op"() {
    arr = [1 : i32, "s", unit],
    i1t = true, i8v = -5 : i8, i64v = 1234567890123 : i64, idx = 7 : index, big = 340282366920938463463374607431768211455 : ui128,
    f16v = 1.5 : f16, bf = 2.0 : bf16, f32v = -0.25 : f32, f64v = 3.0e100 : f64, f8 = 1.0 : f8E4M3FN,
    str_typed = "abc" : i32, sym = @foo, nested = @foo::@bar, ty = tensor<2x?xf32>,
    darr = array<i64: 1, -2, 3>, barr = array<i1: true, false, true>,
    dense = dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>, splat = dense<1.0> : tensor<4xf32>,
    bools = dense<[true, false, true, true, false, false, true, false, true]> : tensor<9xi1>,
    strs = dense<["a", "bc"]> : tensor<2x!test.s>, sstr = dense<"zz"> : tensor<3x!test.s>,
    res = dense_resource<blob1> : tensor<3xi32>,
    sparse = sparse<[[0, 0], [1, 2]], [1, 5]> : tensor<3x4xi32>,
    cplx = complex<f32>, tup = tuple<i32, f32>, fn = (i32, f32) -> (i64), vec = vector<4xf32>,
    ut = tensor<*xf32>, mr = memref<4x?xf32>, ui = ui16, si = si8, none = none,
    enc = tensor<4xf32, "enc">, f8t = f8E5M2, tf = tf32, dist = distinct[0]<"x">
  } : () -> () loc(callsite(#loc1 at #loc2))
  "test.op2"() : () -> () loc(fused["a.py":1:2, "b.py":3:4])
  "test.op3"() : () -> () loc(fused<"meta">["a.py":1:2])
  "test.op4"() : () -> () loc("named"("c.py":5:6))
  "test.op5"() : () -> () loc(unknown)
  "test.op6"() : () -> () loc("r.py":1:2 to 3:4)
}
{-#
  dialect_resources: {
    builtin: {
      blob1: "0x04000000010000000200000003000000"
    }
  }
#-}
'''
ctx = ir.Context(); ctx.allow_unregistered_dialects = True
m = ir.Module.parse(TEXT, ctx)
for v in range(0, 7):
    f = io.BytesIO()
    try:
        m.operation.write_bytecode(f, desired_version=v)
    except Exception as e:
        print(v, "ERR", str(e)[:200]); continue
    open(f"builtin_v{v}.mlirbc", "wb").write(f.getvalue())
    print(v, len(f.getvalue()))
