"""Compare our reading of a StableHLO portable artifact with jaxlib's.

Stable API (other tests import it; keep the signatures):

    compare(data: bytes) -> None
        Reads `data` (a portable artifact) with jaxlib (stablehlo.deserialize_portable_artifact)
        and with our reader (the jaxmlx-dump tool, --json), normalizes both and raises
        AssertionError with a readable diff if they differ.
    normalized_from_jaxlib(data: bytes) -> dict
    normalized_from_ours(path_or_bytes) -> dict
    dump_tool() -> pathlib.Path        the jaxmlx-dump binary (env JAXMLX_DUMP, else build/tools)
    jaxlib_can_read(data: bytes) -> bool   False when the artifact is newer than jaxlib's StableHLO

Normalized form (both sides, see src/ir/json.h for the tagged value encoding):
    {"name", "module_attrs": {..}, "other_ops": [op], "funcs": [func]}
    func = {"name", "visibility", "arg_types", "result_types", "arg_attrs", "res_attrs", "attrs",
            "loc", "body"}
    op   = {"name", "operands": [canonical value ids], "results": [[id, type]], "attrs",
            "regions": [[{"args": [[id, type]], "ops": [op]}]], "loc": "file:line:col" | ""}
Value ids are renumbered canonically on both sides (block args, then per op: its regions, then
its results), so operand wiring is compared exactly. Dense elements compare by dtype/shape, splat
flag and an FNV-1a hash of the raw little-endian bytes (i1 as one 0/1 byte per element), plus
the values of small integer tensors.

Normalizations (each is a documented difference of representation, not of meaning):
  * Default-valued attributes: StableHLO's VHLO->StableHLO conversion erases attributes equal to
    their defaults (VhloLegalizeToStablehlo.cpp, removeDefaults); our IR keeps every attribute
    VHLO stores. `drop_defaults` erases the same defaults on BOTH sides before comparing.
  * custom_call api_version: StableHLO stores the enum as an i32 IntegerAttr; we keep the enum.
    jaxlib's integer is mapped to the enum name.
  * func visibility: absent sym_visibility means public.
  * Attributes of dialects our reader keeps opaque (sdy, ...) compare by dialect only.
  * Artifacts that mix in other dialects are read by jaxlib in jax's MLIR context (which has
    them registered); identity builtin.unrealized_conversion_cast ops are folded by both.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import struct
import subprocess
import tempfile
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------------------
# Ours
# ---------------------------------------------------------------------------------------------


def dump_tool() -> pathlib.Path:
    env = os.environ.get("JAXMLX_DUMP")
    if env:
        return pathlib.Path(env)
    return REPO / "build" / "tools" / "jaxmlx-dump"


def run_dump(path_or_bytes, *args: str) -> subprocess.CompletedProcess:
    """Runs jaxmlx-dump on a file path or on bytes (via a temporary file)."""
    if isinstance(path_or_bytes, (bytes, bytearray)):
        with tempfile.NamedTemporaryFile(suffix=".mlirbc", delete=False) as f:
            f.write(path_or_bytes)
            tmp = f.name
        try:
            return subprocess.run([str(dump_tool()), tmp, *args], capture_output=True, text=True)
        finally:
            os.unlink(tmp)
    return subprocess.run([str(dump_tool()), str(path_or_bytes), *args], capture_output=True,
                          text=True)


def normalized_from_ours(path_or_bytes) -> dict:
    proc = run_dump(path_or_bytes, "--json")
    if proc.returncode != 0:
        raise AssertionError(f"jaxmlx-dump failed ({proc.returncode}): {proc.stderr.strip()}")
    return canonicalize(json.loads(proc.stdout))


# ---------------------------------------------------------------------------------------------
# jaxlib
# ---------------------------------------------------------------------------------------------

_ENUM_ATTR_RE = re.compile(r"^#stablehlo<(\w+) (\w+)>$")
_API_VERSIONS = ["API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL",
                 "API_VERSION_STATUS_RETURNING", "API_VERSION_STATUS_RETURNING_UNIFIED",
                 "API_VERSION_TYPED_FFI"]


def _mlir():
    from jaxlib.mlir import ir  # noqa: PLC0415 (imported lazily: jaxlib is heavy)
    from jaxlib.mlir.dialects import stablehlo  # noqa: PLC0415
    return ir, stablehlo


def jaxlib_version() -> tuple[int, int, int]:
    _, stablehlo = _mlir()
    return tuple(int(x) for x in stablehlo.get_current_version().split("."))


def artifact_version(data: bytes) -> tuple[int, int, int] | None:
    m = re.search(rb"StableHLO_v(\d+)\.(\d+)\.(\d+)", data[:64])
    return tuple(int(x) for x in m.groups()) if m else None


def jaxlib_can_read(data: bytes) -> bool:
    v = artifact_version(data)
    return v is not None and v <= jaxlib_version()


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


_INT_RE = re.compile(r"^(u?i|si)(\d+)$")


def _elem_of(type_str: str) -> str:
    """The element type of "tensor<2x?x3xf32, #enc>" ("f32")."""
    inner = type_str[len("tensor<"):-1].split(", #")[0]
    return re.sub(r"^(?:(?:\d+|\?)x)*", "", inner)


def _pack_scalars(values: list, elem: str) -> bytes:
    """Packs python numbers as `elem` storage (MLIR dense layout: 1 byte for sub-byte types)."""
    import numpy as np  # noqa: PLC0415
    m = _INT_RE.match(elem)
    if elem == "i1":
        return bytes(1 if v else 0 for v in values)
    if elem == "index":
        m = _INT_RE.match("i64")
    if m:
        bits = int(m.group(2))
        nbytes = max(1, (bits + 7) // 8)
        mask = (1 << bits) - 1 if bits < 64 else (1 << 64) - 1
        return b"".join((int(v) & mask).to_bytes(nbytes, "little") for v in values)
    if any(isinstance(v, int) for v in values) and not m:
        # MLIR prints non-finite floats as hex bit patterns: pack those bits directly.
        width = len(_pack_scalars([0.0], elem.replace("complex<", "").rstrip(">")))
        return b"".join(v.to_bytes(width, "little") if isinstance(v, int)
                        else _pack_scalars([v], elem) for v in values)
    if elem.startswith("complex<"):
        part = elem[len("complex<"):-1]
        flat = []
        for v in values:
            flat += [v.real, v.imag] if isinstance(v, complex) else list(v)
        return _pack_scalars(flat, part)
    import ml_dtypes  # noqa: PLC0415
    dt = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16}
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                 "float8_e4m3b11fnuz", "float8_e4m3", "float8_e3m4", "float8_e8m0fnu",
                 "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"):
        if hasattr(ml_dtypes, name):
            parts = name.split("_")[1]
            key = "f" + name[len("float"):].split("_")[0] + parts[:1].upper() + parts[1:].upper()
            dt[key] = getattr(ml_dtypes, name)
    norm = elem.replace("FNUZ", "FNUZ")
    if norm not in dt:
        raise ValueError(f"cannot pack dense elements of {elem!r}")
    return np.array(values, dtype=dt[norm]).tobytes()


def _num(s: str):
    s = s.strip()
    if s.startswith("0x"):  # a float printed as its bit pattern (NaN, inf)
        return int(s, 16)
    return float(s) if any(c in s for c in ".en") else int(s)


def _parse_literal(text: str) -> list:
    """The element list of a printed dense literal (nested brackets flattened)."""
    text = text.replace("true", "1").replace("false", "0")
    out = []
    for m in re.finditer(r"\(([^()]*),([^()]*)\)|0x[0-9A-Fa-f]+|[-+]?(?:inf|nan|[\d.]+(?:e[-+]?\d+)?)",
                         text):
        if m.group(1) is not None:
            out.append((_num(m.group(1)), _num(m.group(2))))
        else:
            out.append(_num(m.group(0)))
    return out


# Element types whose numpy conversion (the buffer protocol) is exact; others (bf16, f8, complex,
# sub-byte) go through the printed form, since converting them can abort inside jaxlib.
_NUMPY_SAFE = {"i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64", "f16", "f32", "f64"}


def _dense_bytes(attr, type_str: str, splat: bool) -> bytes:
    import numpy as np  # noqa: PLC0415
    ir, _ = _mlir()
    elem = _elem_of(type_str)
    text = str(attr)
    m = re.match(r'^dense<"0x([0-9A-Fa-f]*)">', text)
    if m:  # the printer's hex form is the raw storage
        return bytes.fromhex(m.group(1))
    if elem in _NUMPY_SAFE:
        arr = np.array(ir.DenseElementsAttr(attr))
        if elem == "i1":
            arr = arr.astype(np.uint8)
        raw = arr.tobytes()
        if splat and arr.size:
            raw = raw[: len(raw) // arr.size]
        return raw
    values = _parse_literal(text[len("dense<"):text.rindex("> : ")])
    if splat:
        values = values[:1]
    return _pack_scalars(values, elem)


def _dense_values(raw: bytes, elem: str, splat: bool):
    """Element values of small integer/bool tensors (for default checks and readable diffs)."""
    m = _INT_RE.match(elem)
    if elem != "i1" and not m:
        return None
    bits = 1 if elem == "i1" else int(m.group(2))
    nbytes = max(1, (bits + 7) // 8)
    n = len(raw) // nbytes
    if n > 64:
        return None
    signed = elem != "i1" and not elem.startswith("ui")
    vals = [int.from_bytes(raw[i * nbytes:(i + 1) * nbytes], "little", signed=signed)
            for i in range(n)]
    return vals


def _float_bits(value: float, type_str: str) -> str:
    if type_str == "f64":
        return hex(struct.unpack("<Q", struct.pack("<d", value))[0])
    if type_str == "f32":
        return hex(struct.unpack("<I", struct.pack("<f", value))[0])
    if type_str == "f16":
        return hex(struct.unpack("<H", struct.pack("<e", value))[0])
    if type_str == "bf16":
        return hex(struct.unpack("<I", struct.pack("<f", value))[0] >> 16)
    raise ValueError(f"float attribute of type {type_str}")


def _attr(a, op_name: str = "", attr_name: str = "") -> Any:
    """jaxlib attribute -> tagged normalized value."""
    ir, sh = _mlir()
    if isinstance(a, ir.BoolAttr):
        return bool(a.value)
    if isinstance(a, ir.IntegerAttr):
        t = str(a.type)
        v = a.value
        if op_name == "stablehlo.custom_call" and attr_name == "api_version":
            return ["enum", "api_version", _API_VERSIONS[v]]
        if t.startswith("ui") and v < 0:
            v &= (1 << int(t[2:])) - 1
        return ["int", t, v]
    if isinstance(a, ir.FloatAttr):
        return ["float", str(a.type), _float_bits(a.value, str(a.type))]
    if isinstance(a, ir.FlatSymbolRefAttr):
        return ["sym", a.value]
    if isinstance(a, ir.StringAttr):
        return ["str", a.value]
    if isinstance(a, ir.UnitAttr):
        return ["unit"]
    if isinstance(a, ir.TypeAttr):
        return ["type", str(a.value)]
    if isinstance(a, ir.DenseI64ArrayAttr):
        return ["i64s", list(a)]
    if isinstance(a, ir.DenseBoolArrayAttr):
        return ["bools", [bool(x) for x in a]]
    if isinstance(a, ir.DenseElementsAttr):
        d = ir.DenseElementsAttr(a)
        t = str(d.type)
        n = 1
        shape = ir.RankedTensorType(d.type).shape
        for s in shape:
            n *= s
        splat = bool(d.is_splat) and n != 1
        raw = _dense_bytes(a, t, splat)
        return ["dense", t, splat, fnv1a64(raw), len(raw), _dense_values(raw, _elem_of(t), splat)]
    if isinstance(a, ir.ArrayAttr):
        return ["array", [_attr(x, op_name) for x in a]]
    if isinstance(a, ir.DictAttr):
        return ["dict", {a[i].name: _attr(a[i].attr, op_name) for i in range(len(a))}]
    return _stablehlo_attr(a, sh)


def _stablehlo_attr(a, sh) -> Any:
    text = str(a)
    m = _ENUM_ATTR_RE.match(text)
    if m:
        return ["enum", m.group(1), m.group(2)]
    if text.startswith("#stablehlo.gather<"):
        g = sh.GatherDimensionNumbers(a)
        return ["gather", {"offset_dims": list(g.offset_dims),
                           "collapsed_slice_dims": list(g.collapsed_slice_dims),
                           "operand_batching_dims": list(g.operand_batching_dims),
                           "start_indices_batching_dims": list(g.start_indices_batching_dims),
                           "start_index_map": list(g.start_index_map),
                           "index_vector_dim": g.index_vector_dim}]
    if text.startswith("#stablehlo.scatter<"):
        s = sh.ScatterDimensionNumbers(a)
        return ["scatter", {"update_window_dims": list(s.update_window_dims),
                            "inserted_window_dims": list(s.inserted_window_dims),
                            "input_batching_dims": list(s.input_batching_dims),
                            "scatter_indices_batching_dims":
                                list(s.scatter_indices_batching_dims),
                            "scatter_dims_to_operand_dims": list(s.scattered_dims_to_operand_dims),
                            "index_vector_dim": s.index_vector_dim}]
    if text.startswith("#stablehlo.dot<"):
        d = sh.DotDimensionNumbers(a)
        return ["dot", {"lhs_batching_dimensions": list(d.lhs_batching_dimensions),
                        "rhs_batching_dimensions": list(d.rhs_batching_dimensions),
                        "lhs_contracting_dimensions": list(d.lhs_contracting_dimensions),
                        "rhs_contracting_dimensions": list(d.rhs_contracting_dimensions)}]
    if text.startswith("#stablehlo.conv<"):
        c = sh.ConvDimensionNumbers(a)
        return ["conv", {k: (list(getattr(c, k)) if k.endswith("dimensions") else getattr(c, k))
                         for k in ("input_batch_dimension", "input_feature_dimension",
                                   "input_spatial_dimensions", "kernel_input_feature_dimension",
                                   "kernel_output_feature_dimension",
                                   "kernel_spatial_dimensions", "output_batch_dimension",
                                   "output_feature_dimension", "output_spatial_dimensions")}]
    if text.startswith("#stablehlo.dot_algorithm<"):
        d = sh.DotAlgorithm(a)
        return ["dot_algorithm", {
            "lhs_precision_type": str(d.lhs_precision_type),
            "rhs_precision_type": str(d.rhs_precision_type),
            "accumulation_type": str(d.accumulation_type),
            "lhs_component_count": d.lhs_component_count,
            "rhs_component_count": d.rhs_component_count,
            "num_primitive_operations": d.num_primitive_operations,
            "allow_imprecise_accumulation": bool(d.allow_imprecise_accumulation)}]
    if text.startswith("#stablehlo.channel_handle<"):
        c = sh.ChannelHandle(a)
        return ["channel_handle", {"handle": c.handle, "type": c.channel_type}]
    if text.startswith("#stablehlo.result_accuracy<"):
        r = sh.ResultAccuracyAttr(a)
        return ["result_accuracy", {"atol": _float_bits(r.atol, "f64"),
                                    "rtol": _float_bits(r.rtol, "f64"), "ulps": r.ulps,
                                    "mode": _ENUM_ATTR_RE.match(str(r.mode)).group(2)
                                    if _ENUM_ATTR_RE.match(str(r.mode))
                                    else str(r.mode).split("<")[-1].rstrip(">")}]
    if text.startswith("#stablehlo.output_operand_alias<"):
        o = sh.OutputOperandAlias(a)
        return ["output_operand_alias", {"output_tuple_indices": list(o.output_tuple_indices),
                                         "operand_index": o.operand_index,
                                         "operand_tuple_indices": list(o.operand_tuple_indices)}]
    # Attributes of dialects we do not decode (sdy, ...) compare by dialect only: our reader
    # keeps them opaque, without their text.
    dialect = text[1:].split("<")[0].split(".")[0] if text.startswith("#") else "builtin"
    return ["opaque", dialect, text if dialect == "stablehlo" else ""]


# --- locations: parse MLIR's printed location (the python API has no kind accessors) ---------

def _parse_loc(text: str) -> dict:
    """{"name": outermost NameLoc name, "file": "f:l:c" of the first file frame} of `loc(...)`."""
    pos = 0
    out = {"name": "", "file": ""}

    def string() -> str:
        nonlocal pos
        assert text[pos] == '"'
        pos += 1
        s = []
        while text[pos] != '"':
            if text[pos] == "\\":
                s.append(text[pos:pos + 2])
                pos += 2
            else:
                s.append(text[pos])
                pos += 1
        pos += 1
        return "".join(s)

    def number() -> str:
        nonlocal pos
        start = pos
        while pos < len(text) and text[pos].isdigit():
            pos += 1
        return text[start:pos]

    def expect(tok: str) -> None:
        nonlocal pos
        assert text.startswith(tok, pos), (tok, text[pos:pos + 20])
        pos += len(tok)

    def loc() -> None:
        nonlocal pos
        if text.startswith("unknown", pos):
            pos += len("unknown")
        elif text.startswith("callsite(", pos):
            pos += len("callsite(")
            loc()
            expect(" at ")
            loc()
            expect(")")
        elif text.startswith("fused", pos):
            pos += len("fused")
            if text[pos] == "<":  # metadata attribute: skip balanced <...>
                depth = 0
                while True:
                    depth += {"<": 1, ">": -1}.get(text[pos], 0)
                    pos += 1
                    if depth == 0:
                        break
            expect("[")
            while True:
                loc()
                if text[pos] == "]":
                    pos += 1
                    break
                expect(", ")
        elif text[pos] == '"':
            s = string()
            if pos < len(text) and text[pos] == ":":  # file:line:col
                pos += 1
                line = number()
                expect(":")
                col = number()
                if text.startswith(" to ", pos):  # a range: skip its end
                    pos += 4
                    while pos < len(text) and (text[pos].isdigit() or text[pos] == ":"):
                        pos += 1
                if not out["file"]:
                    out["file"] = f"{s}:{line}:{col}"
            else:
                if not out["name"]:
                    out["name"] = s
                if pos < len(text) and text[pos] == "(":
                    pos += 1
                    loc()
                    expect(")")
        else:
            raise ValueError(f"unexpected location syntax at {text[pos:pos + 30]!r}")

    try:
        expect("loc(")
        loc()
    except (AssertionError, IndexError, ValueError):
        return {"name": "", "file": ""}
    return out


def _loc(location) -> str:
    return _parse_loc(str(location))["file"]


class _Numbering:
    def __init__(self):
        self.ids: dict = {}

    def define(self, value) -> int:
        self.ids[value] = len(self.ids)
        return self.ids[value]

    def use(self, value) -> int:
        return self.ids.get(value, -1)


def _region(region, num: _Numbering) -> list:
    blocks = []
    for block in region.blocks:
        args = [[num.define(a), str(a.type)] for a in block.arguments]
        ops = [_op(o.operation, num) for o in block.operations]
        blocks.append({"args": args, "ops": ops})
    return blocks


def _complex_constant(op) -> dict:
    """The value of a complex stablehlo.constant, from its printed form: jaxlib aborts the process
    when python code touches a complex dense attribute (no typed caster for it)."""
    text = str(op)
    t = str(op.results[0].type)
    body = text[text.index("dense<") + len("dense<"):text.rindex("> : ")]
    n = 1
    for dim in re.findall(r"(\d+)x", t):
        n *= int(dim)
    values = _parse_literal(body)
    splat = not body.startswith("[") and n != 1
    raw = _pack_scalars(values[:1] if splat else values, _elem_of(t))
    return {"value": ["dense", t, splat, fnv1a64(raw), len(raw), None]}


def _named_attrs(op, op_name: str, skip=()) -> dict:
    if op_name == "stablehlo.constant" and "complex<" in str(op.results[0].type):
        return _complex_constant(op)
    attrs = op.attributes
    out = {}
    for i in range(len(attrs)):
        na = attrs[i]
        if na.name in skip:
            continue
        out[na.name] = _attr(na.attr, op_name, na.name)
    return out


def _op(op, num: _Numbering) -> dict:
    d = {"name": op.name, "operands": [num.use(v) for v in op.operands]}
    d["attrs"] = _named_attrs(op, op.name)
    d["regions"] = [_region(r, num) for r in op.regions]
    d["results"] = [[num.define(r), str(r.type)] for r in op.results]
    d["loc"] = _loc(op.location)
    return d


def _func(op) -> dict:
    ir, _ = _mlir()
    attrs = op.attributes
    ftype = ir.FunctionType(ir.TypeAttr(attrs["function_type"]).value)

    def dicts(key):
        if key not in attrs:
            return []
        return [_attr(d)[1] for d in ir.ArrayAttr(attrs[key])]

    num = _Numbering()
    return {
        "name": ir.StringAttr(attrs["sym_name"]).value,
        "visibility": ir.StringAttr(attrs["sym_visibility"]).value
        if "sym_visibility" in attrs else "public",
        "arg_types": [str(t) for t in ftype.inputs],
        "result_types": [str(t) for t in ftype.results],
        "arg_attrs": dicts("arg_attrs"),
        "res_attrs": dicts("res_attrs"),
        "attrs": _named_attrs(op, "func.func", skip=("sym_name", "sym_visibility", "function_type",
                                                     "arg_attrs", "res_attrs")),
        "loc": _loc(op.location),
        "body": _region(op.regions[0], num) if len(op.regions[0].blocks) else [],
    }


def normalized_from_jaxlib(data: bytes) -> dict:
    ir, stablehlo = _mlir()
    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    try:
        module = stablehlo.deserialize_portable_artifact(ctx, bytes(data))
    except ValueError:
        # Artifacts mixing in other dialects (sdy) need them registered: use jax's context.
        from jax._src.interpreters import mlir as jax_mlir  # noqa: PLC0415
        ctx = jax_mlir.make_ir_context()
        module = stablehlo.deserialize_portable_artifact(ctx, bytes(data))
    mop = module.operation
    out = {"name": ir.StringAttr(mop.attributes["sym_name"]).value
           if "sym_name" in mop.attributes else "",
           "module_attrs": _named_attrs(mop, "builtin.module", skip=("sym_name",)),
           "other_ops": [], "funcs": []}
    for o in module.body.operations:
        o = o.operation
        if o.name == "func.func":
            out["funcs"].append(_func(o))
        else:
            out["other_ops"].append(_op(o, _Numbering()))
    return canonicalize(out)


# ---------------------------------------------------------------------------------------------
# Normalization shared by both sides
# ---------------------------------------------------------------------------------------------

_COLLECTIVES = {"stablehlo.all_gather", "stablehlo.all_reduce", "stablehlo.reduce_scatter",
                "stablehlo.all_to_all", "stablehlo.collective_permute",
                "stablehlo.collective_broadcast", "stablehlo.collective_reduce"}
_RESULT_ACCURACY_OPS = {f"stablehlo.{n}" for n in (
    "cbrt", "cosine", "exponential", "exponential_minus_one", "log", "log_plus_one", "logistic",
    "rsqrt", "sine", "sqrt", "tan", "tanh")}


def _all(v, pred) -> bool:
    """True if v is a list value (i64s/bools/dense with values/array) whose elements satisfy pred."""
    if not isinstance(v, list) or not v:
        return False
    if v[0] in ("i64s", "bools"):
        return all(pred(x) for x in v[1])
    if v[0] == "dense":
        return v[5] is not None and all(pred(x) for x in v[5])
    if v[0] == "array":
        return all(pred(x) for x in v[1])
    return False


def _is_empty(v) -> bool:
    if isinstance(v, list) and v:
        if v[0] in ("array", "i64s", "bools"):
            return not v[1]
        if v[0] == "dense":
            return v[4] == 0
        if v[0] == "str":
            return v[1] == ""
        if v[0] == "dict":
            return not v[1]
    return False


def drop_defaults(op_name: str, attrs: dict) -> dict:
    """Erases attributes equal to StableHLO's defaults (mirrors removeDefaults, see module doc)."""
    a = dict(attrs)
    default = ["enum", "precision", "DEFAULT"]

    def drop(name, cond):
        if name in a and cond(a[name]):
            del a[name]

    if op_name in _COLLECTIVES:
        drop("channel_handle", lambda v: v == ["channel_handle", {"handle": 0, "type": 0}])
    if op_name == "stablehlo.cholesky":
        drop("lower", lambda v: v is False)
    if op_name == "stablehlo.compare":
        drop("compare_type", lambda v: v == ["enum", "comparison_type", "NOTYPE"])
    if op_name == "stablehlo.composite":
        drop("version", lambda v: v[0] == "int" and v[2] == 0)
        drop("composite_attributes", _is_empty)
    if op_name in ("stablehlo.convolution", "stablehlo.dynamic_conv"):
        drop("window_strides", lambda v: _all(v, lambda x: x == 1))
        if op_name == "stablehlo.convolution":
            drop("padding", lambda v: _all(v, lambda x: x == 0))
        drop("lhs_dilation", lambda v: _all(v, lambda x: x == 1))
        drop("rhs_dilation", lambda v: _all(v, lambda x: x == 1))
        drop("window_reversal", lambda v: _all(v, lambda x: not x))
        drop("precision_config", lambda v: v == ["array", []] or _all(v, lambda x: x == default))
    if op_name == "stablehlo.custom_call":
        drop("has_side_effect", lambda v: v is False)
        drop("backend_config", _is_empty)
        drop("api_version", lambda v: v == ["enum", "api_version", "API_VERSION_ORIGINAL"])
        drop("called_computations", _is_empty)
        if _is_empty(a.get("operand_layouts")) and _is_empty(a.get("result_layouts")):
            a.pop("operand_layouts")
            a.pop("result_layouts")
        drop("output_operand_aliases", _is_empty)
        drop("result_tilings", _is_empty)
    if op_name in ("stablehlo.dot_general", "stablehlo.dot"):
        drop("precision_config", lambda v: v == ["array", []] or _all(v, lambda x: x == default))
    if op_name == "stablehlo.dynamic_broadcast_in_dim":
        drop("known_expanding_dimensions", _is_empty)
        drop("known_nonexpanding_dimensions", _is_empty)
    if op_name in ("stablehlo.gather", "stablehlo.dynamic_gather"):
        drop("indices_are_sorted", lambda v: v is False)
    if op_name == "stablehlo.infeed":
        drop("infeed_config", _is_empty)
        drop("layout", _is_empty)
    if op_name == "stablehlo.outfeed":
        drop("outfeed_config", _is_empty)
    if op_name in ("stablehlo.send", "stablehlo.recv"):
        drop("is_host_transfer", lambda v: v is False)
        drop("source_target_pairs", _is_empty)
    if op_name == "stablehlo.reduce_window":
        for n in ("window_strides", "base_dilations", "window_dilations"):
            drop(n, lambda v: _all(v, lambda x: x == 1))
        drop("padding", lambda v: _all(v, lambda x: x == 0))
    if op_name == "stablehlo.scatter":
        drop("indices_are_sorted", lambda v: v is False)
        drop("unique_indices", lambda v: v is False)
    if op_name == "stablehlo.select_and_scatter":
        drop("window_strides", lambda v: _all(v, lambda x: x == 1))
        drop("padding", lambda v: _all(v, lambda x: x == 0))
    if op_name == "stablehlo.sort":
        drop("dimension", lambda v: v == ["int", "i64", -1])
        drop("is_stable", lambda v: v is False)
    if op_name in _RESULT_ACCURACY_OPS:
        drop("result_accuracy", lambda v: v == ["result_accuracy", {
            "atol": "0x0", "rtol": "0x0", "ulps": 0, "mode": "DEFAULT"}])
    return a


def canonicalize(m: dict) -> dict:
    """Renumbers values canonically and drops default-valued attributes (both sides)."""
    def attrs_of(op_name, attrs):
        return drop_defaults(op_name, attrs)

    def region(r, ids):
        out = []
        for b in r:
            args = [[ids.setdefault(a[0], len(ids)), a[1]] for a in b["args"]]
            out.append({"args": args, "ops": [op(o, ids) for o in b["ops"]]})
        return out

    def op(o, ids):
        d = {"name": o["name"], "operands": [ids.get(x, -1) for x in o["operands"]]}
        d["attrs"] = attrs_of(o["name"], o["attrs"])
        d["regions"] = [region(r, ids) for r in o["regions"]]
        d["results"] = [[ids.setdefault(r[0], len(ids)), r[1]] for r in o["results"]]
        d["loc"] = o["loc"]
        return d

    out = {"name": m["name"], "module_attrs": attrs_of("builtin.module", m["module_attrs"]),
           "other_ops": [op(o, {}) for o in m["other_ops"]], "funcs": []}
    for f in m["funcs"]:
        g = dict(f)
        g["arg_attrs"] = [] if all(not d for d in f["arg_attrs"]) else f["arg_attrs"]
        g["res_attrs"] = [] if all(not d for d in f["res_attrs"]) else f["res_attrs"]
        g["attrs"] = attrs_of("func.func", f["attrs"])
        g["body"] = region(f["body"], {})
        out["funcs"].append(g)
    return out


# ---------------------------------------------------------------------------------------------
# Diff
# ---------------------------------------------------------------------------------------------


def _diff(a, b, path: str, out: list, limit: int = 20) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:
                out.append(f"{path}.{k}: only in jaxlib: {json.dumps(b[k])[:200]}")
            elif k not in b:
                out.append(f"{path}.{k}: only in ours: {json.dumps(a[k])[:200]}")
            else:
                _diff(a[k], b[k], f"{path}.{k}", out, limit)
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and not (
            a and isinstance(a[0], str) and a[0] in ("dense", "int", "float", "enum")):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out, limit)
        return
    if a != b:
        out.append(f"{path}: ours {json.dumps(a)[:300]} != jaxlib {json.dumps(b)[:300]}")


def _describe_paths(ours: dict, theirs: dict) -> list[str]:
    out: list[str] = []
    if len(ours["funcs"]) != len(theirs["funcs"]):
        out.append(f"func count: ours {len(ours['funcs'])} != jaxlib {len(theirs['funcs'])}")
    for i, (f, g) in enumerate(zip(ours["funcs"], theirs["funcs"])):
        _diff(f, g, f"func[{i}] @{g['name']}", out)
    _diff({k: v for k, v in ours.items() if k != "funcs"},
          {k: v for k, v in theirs.items() if k != "funcs"}, "module", out)
    return out


def compare(data: bytes) -> None:
    """Raises AssertionError (with a readable diff) unless our reading equals jaxlib's."""
    theirs = normalized_from_jaxlib(data)
    ours = normalized_from_ours(bytes(data))
    if ours == theirs:
        return
    diffs = _describe_paths(ours, theirs)
    if not diffs:
        diffs = ["(normalized forms differ, but no difference was located)"]
    raise AssertionError("our reading differs from jaxlib's:\n  " + "\n  ".join(diffs))
