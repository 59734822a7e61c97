"""Time-stamps a command's output and reports its longest silence.

``python -u experiments/run.py --exp=concentric 2>&1 | python benchmarks/silences.py``
prefixes each line with the seconds since the first byte was awaited, then
prints the total time and the longest gap between two lines (or before the
first / after the last).
"""

import sys
import time


def main() -> None:
  start = last = time.time()
  longest = 0.0
  for line in sys.stdin:
    now = time.time()
    longest, last = max(longest, now - last), now
    sys.stdout.write(f"{now - start:8.2f} {line}")
    sys.stdout.flush()
  now = time.time()
  longest = max(longest, now - last)
  print(f"total {now - start:.1f} s, longest silence {longest:.1f} s")


if __name__ == "__main__":
  main()
