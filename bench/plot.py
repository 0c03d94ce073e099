"""The benchmark chart as a PNG, written with zlib + struct: no plotting dependency to install
(matplotlib would add ~40 MB of wheels to `make bench` for one bar chart).

One group of horizontal bars per case: ours / native mlx, ours / jax cpu (and ours / jax gpu),
on a log axis centred on 1x. A bar going left of 1x means ours is faster.
"""

from __future__ import annotations

import math
import pathlib
import struct
import zlib

import common

# 5x7 glyphs, column-major, bit 0 = top row (the classic LCD font layout).
_FONT = {
    " ": "0000000000", "0": "3e5149453e", "1": "00427f4000", "2": "4261514946",
    "3": "2141454b31", "4": "1814127f10", "5": "2745454539", "6": "3c4a494930",
    "7": "0171090503", "8": "3649494936", "9": "064949291e", "a": "7e1111117e",
    "b": "7f49494936", "c": "3e41414122", "d": "7f4141221c", "e": "7f49494941",
    "f": "7f09090901", "g": "3e4149497a", "h": "7f0808087f", "i": "00417f4100",
    "j": "2040413f01", "k": "7f08142241", "l": "7f40404040", "m": "7f021c027f",
    "n": "7f0408107f", "o": "3e4141413e", "p": "7f09090906", "q": "3e4151215e",
    "r": "7f09192946", "s": "2649494932", "t": "01017f0101", "u": "3f4040403f",
    "v": "1f2040201f", "w": "3f4038403f", "x": "6314081463", "y": "0708700807",
    "z": "6151494543", ".": "0060600000", "/": "2010080402", "_": "4040404040",
    "-": "0808080808", ":": "0036360000", "(": "001c224100", ")": "0041221c00",
    "=": "1414141414", "<": "0814224100", ">": "0041221408", ",": "0050300000",
    "+": "08083e0808", "%": "2313086462", "*": "4428102844",  # '*' drawn as a small x: "times"
}

WHITE, BLACK, GREY, LIGHT = (255, 255, 255), (30, 30, 30), (120, 120, 120), (225, 225, 225)
COLORS = {common.MLX: (52, 101, 164), common.JAX_CPU: (230, 140, 30),
          common.JAX_GPU: (60, 160, 80)}


class Canvas:
  def __init__(self, w: int, h: int):
    self.w, self.h = w, h
    self.px = bytearray(bytes(WHITE) * (w * h))

  def rect(self, x0: int, y0: int, x1: int, y1: int, color) -> None:
    x0, x1 = max(0, min(x0, x1)), min(self.w, max(x0, x1))
    y0, y1 = max(0, min(y0, y1)), min(self.h, max(y0, y1))
    row = bytes(color) * (x1 - x0)
    for y in range(y0, y1):
      i = (y * self.w + x0) * 3
      self.px[i:i + len(row)] = row

  def text(self, x: int, y: int, s: str, color=BLACK, k: int = 2) -> int:
    """Draws s with its top-left at (x, y), k pixels per font dot; returns the end x."""
    for ch in s:
      g = _FONT.get(ch if ch in _FONT else ch.lower(), _FONT["-"] if ch not in " " else None)
      if g is None:
        g = _FONT[" "]
      for c in range(5):
        bits = int(g[2 * c:2 * c + 2], 16)
        for r in range(7):
          if bits >> r & 1:
            self.rect(x + c * k, y + r * k, x + (c + 1) * k, y + (r + 1) * k, color)
      x += 6 * k
    return x

  def png(self) -> bytes:
    raw = b"".join(b"\0" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3])
                   for y in range(self.h))

    def chunk(tag: bytes, data: bytes) -> bytes:
      return struct.pack(">I", len(data)) + tag + data + \
          struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + \
        chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def write_chart(report: dict, path: pathlib.Path) -> None:
  others = [c for c in (common.MLX, common.JAX_CPU, common.JAX_GPU) if c in report["columns"]]
  rows = []  # (case name, [(other, ratio or None, status note)])
  for r in report["results"]:
    bars = []
    ours = r["columns"].get(common.OURS) or {}
    for o in others:
      x = common.ratio(r, common.OURS, o)
      note = ""
      if x is None:
        bad = ours if ours.get("status") != "ok" else (r["columns"].get(o) or {})
        note = (bad.get("status") or "n/a").split(":")[0]
      elif ours.get("check") and not ours["check"]["ok"]:
        note = "mismatch"
      bars.append((o, x, note))
    rows.append((r["name"], bars))

  ratios = [x for _, bars in rows for _, x, _ in bars if x]
  lo = math.floor(math.log10(min(ratios + [0.5])))
  hi = math.ceil(math.log10(max(ratios + [2.0])))
  bar_h, gap, left, right, top = 16, 14, 250, 150, 80
  width = 1000
  height = top + sum(len(b) * bar_h + gap for _, b in rows) + 50
  cv = Canvas(width, height)
  plot_w = width - left - right

  def xpos(v: float) -> int:
    return left + round((math.log10(v) - lo) / (hi - lo) * plot_w)

  cv.text(10, 10, "jax-mlx: time of ours / time of other (log scale, left of 1x = ours faster)")
  lx = 10
  for o in others:
    cv.rect(lx, 40, lx + 14, 54, COLORS[o])
    lx = cv.text(lx + 20, 41, f"ours / {common.COLUMN_TITLES[o]}") + 24
  y = top
  for d in range(lo, hi + 1):
    x = xpos(10.0 ** d)
    cv.rect(x, top - 6, x + 1, height - 40, GREY if d == 0 else LIGHT)
    label = f"{10.0 ** d:g}x"
    cv.text(x - len(label) * 6, height - 32, label, GREY)
  for name, bars in rows:
    cv.text(10, y + (len(bars) * bar_h) // 2 - 7, name[:19])
    for o, x, note in bars:
      if x is not None:
        one, end = xpos(1.0), xpos(x)
        cv.rect(min(one, end), y + 2, max(one, end) + 1, y + bar_h - 1, COLORS[o])
        cv.text(max(one, end) + 6, y + 2, f"{x:.2f}*" + (f" {note}" if note else ""), BLACK, k=2)
      else:
        cv.text(xpos(1.0) + 6, y + 2, note[:40], GREY, k=2)
      y += bar_h
    y += gap
  path.write_bytes(cv.png())
