"""Compiled programs kept on disk, so that a second run skips compiling."""

from __future__ import annotations

import os

__all__ = ["compilation_cache"]


def compilation_cache(force: bool = False) -> None:
  """Keeps every compiled program in jax's persistent compilation cache.

  ``JAX_COMPILATION_CACHE_DIR`` picks the folder (default
  ``~/.cache/vaells_jax/jax``); ``VAELLS_NO_CACHE=1`` turns it off. Without
  ``force`` (a library call) a cache folder the caller already configured
  is left as it is, with its own settings.
  """
  if os.environ.get("VAELLS_NO_CACHE"):
    return
  import jax

  if not force and jax.config.jax_compilation_cache_dir:
    return
  folder = os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(
    os.path.expanduser("~"), ".cache", "vaells_jax", "jax"
  )
  jax.config.update("jax_compilation_cache_dir", folder)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
