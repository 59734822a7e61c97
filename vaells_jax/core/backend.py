"""Choices made per backend when a program is compiled.

A CPU and a GPU want different programs for the same arithmetic: on a CPU a
conditional is cheap and keeps XLA from recomputing a fused producer, and
chunks keep the working set in cache; on a GPU a conditional (and a loop's
condition) is a round trip to the host, and chunks run one after another.
Modules call :func:`per_platform` through this module (``backend.per_platform``)
so that a benchmark or test can force either branch in one place.
"""

from __future__ import annotations

import jax

__all__ = ["per_platform"]


def per_platform(cpu, other, *args):
  """``cpu(*args)`` in a program compiled for a CPU, ``other(*args)`` in one
  compiled for a GPU or TPU (``lax.platform_dependent``: only the branch of
  the program's platform is lowered, so neither costs the other anything)."""
  return jax.lax.platform_dependent(*args, cpu=cpu, default=other)
