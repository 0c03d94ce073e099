"""CPU time per step of each thread of the process, for one case ours or native MLX: which thread
the host time of a step is on, and how much of it there is. Steps run for --seconds after a
warm-up; each thread's user + system time comes from /proc/self/task (Linux), with its
voluntary context switches (each one a sleep that another thread's wake-up ended).

  python3 bench/thread_cpu.py --only mlp_train [--native] [--pipelined 10] [--seconds 4]
  JAXMLX_HOST_TIMES=/tmp/t.txt python3 bench/thread_cpu.py --only mlp_train   # and phases

--pipelined N waits once per N steps (jax's dispatch and our issue of the next steps overlap
the GPU's work) instead of after every step. --ready FILE writes the process id there once the
warm-up is done, for a profiler to attach (`perf record -p $(cat FILE)`). Threads using under
5 µs and half a switch per step are not listed; `main` is the thread that runs the steps.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))


def threads() -> dict[int, tuple[str, float, int]]:
  """tid -> (name, CPU seconds, voluntary context switches) of every thread of this process."""
  hz = os.sysconf("SC_CLK_TCK")
  out = {}
  for t in os.listdir("/proc/self/task"):
    try:
      with open(f"/proc/self/task/{t}/stat") as f:
        stat = f.read()
      with open(f"/proc/self/task/{t}/comm") as f:
        name = f.read().strip()
      with open(f"/proc/self/task/{t}/status") as f:
        switches = next(int(line.split(":")[1]) for line in f
                        if line.startswith("voluntary_ctxt_switches"))
    except (OSError, StopIteration):
      continue  # a thread that ended meanwhile
    fields = stat[stat.rindex(")") + 2:].split()  # after the name, which may hold spaces
    out[int(t)] = (name, (int(fields[11]) + int(fields[12])) / hz, switches)
  return out


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--only", required=True, help="case name")
  ap.add_argument("--native", action="store_true", help="the native MLX program, not ours")
  ap.add_argument("--pipelined", type=int, default=1, metavar="N", help="wait once per N steps")
  ap.add_argument("--seconds", type=float, default=4.0)
  ap.add_argument("--warmup", type=int, default=30, help="waited steps before timing")
  ap.add_argument("--size", default="default", choices=["quick", "default", "full"])
  ap.add_argument("--ready", help="a file to write the process id to after the warm-up")
  a = ap.parse_args()
  sys.path.insert(0, BENCH)
  os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
  import common
  import jax
  case = next(common.selected_cases([a.only], common.Size(a.size)))
  prog = case.make_mlx() if a.native else case.make_jax(jax.devices("mlx")[0])
  for _ in range(a.warmup):
    prog.sync(prog.call())
  if a.ready:
    with open(a.ready, "w") as f:
      f.write(str(os.getpid()))
  before, steps, t0 = threads(), 0, time.perf_counter()
  while time.perf_counter() - t0 < a.seconds:
    r = None
    for _ in range(a.pipelined):
      r = prog.call()
    prog.sync(r)
    steps += a.pipelined
  wall = (time.perf_counter() - t0) / steps * 1e6
  after = threads()
  per_step = lambda x: x / steps * 1e6  # noqa: E731
  total = sum(c - before.get(t, ("", 0.0, 0))[1] for t, (_, c, _) in after.items())
  print(f"{a.only} {'native' if a.native else 'ours'}, wait every {a.pipelined}: {steps} steps, "
        f"{wall:.0f} µs/step wall, {per_step(total):.0f} µs/step CPU (all threads)")
  for t, (name, cpu, switches) in sorted(after.items()):
    _, cpu0, switches0 = before.get(t, ("", 0.0, 0))
    us, sw = per_step(cpu - cpu0), (switches - switches0) / steps
    if us >= 5 or sw >= 0.5:
      label = "main" if t == os.getpid() else name
      print(f"  {label:16s} {us:7.0f} µs/step CPU  {sw:5.1f} switches/step")
  sys.stdout.flush()
  os._exit(0)  # without the interpreter's teardown of MLX and jax (not what is measured)


if __name__ == "__main__":
  main()
