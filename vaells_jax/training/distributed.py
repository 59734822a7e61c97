"""Training across processes (several hosts): start-up and who writes.

Every process runs the same command with ``config.data_parallel=True``; the
mesh spans ``jax.devices()``, every device of every process, and each process
feeds the rows of the global batch that its own devices hold. Process 0 alone
reads and writes the workdir (checkpoints, ``metrics.jsonl``, logs, the
report); the others receive the state it starts (or resumes) from.
"""

from __future__ import annotations

import os
from typing import Mapping

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec

__all__ = [
  "ENV_VARS",
  "broadcast_from_main",
  "checkpointable",
  "host_local",
  "initialize",
  "initialize_from_env",
  "is_main",
  "replicate",
]

SHUTDOWN_TIMEOUT_S = 24 * 3600
# What initialize_from_env reads: all three or none.
ENV_VARS = ("VAELLS_COORDINATOR", "VAELLS_NUM_PROCESSES", "VAELLS_PROCESS_ID")


def initialize(
  coordinator: str, num_processes: int, process_id: int, timeout_s: int = 300
) -> None:
  """Joins this process to a run of ``num_processes`` (``jax.distributed``).

  Call it before anything else touches jax's devices. On CPUs the processes
  reduce over gloo (``jax_cpu_collectives_implementation``, jax's default).

  Args:
    coordinator: ``HOST:PORT`` that process 0 listens on and every process
      reaches, the same on every process.
    num_processes: how many processes the run has, >= 1.
    process_id: this process's index in ``[0, num_processes)``.
    timeout_s: how long to wait for every process to join.

  Raises:
    ValueError: for a malformed address or ids out of range.
  """
  host, _, port = coordinator.rpartition(":")
  if not host or not port.isdigit() or not 0 < int(port) < 65536:
    raise ValueError(
      f"The coordinator must be HOST:PORT (e.g. host0:12355), got {coordinator!r}."
    )
  if num_processes < 1:
    raise ValueError(f"The number of processes must be >= 1, got {num_processes}.")
  if not 0 <= process_id < num_processes:
    raise ValueError(
      f"The process id must be in [0, {num_processes}), got {process_id}."
    )
  jax.distributed.initialize(
    coordinator_address=coordinator,
    num_processes=num_processes,
    process_id=process_id,
    initialization_timeout=timeout_s,
    # At exit every process waits for all (jax's default: 5 minutes); the
    # others finish with training and wait while process 0 evaluates. A
    # process that dies ends the wait at once.
    shutdown_timeout_seconds=SHUTDOWN_TIMEOUT_S,
  )


def initialize_from_env(environ: Mapping[str, str] | None = None) -> bool:
  """:func:`initialize` from :data:`ENV_VARS`, if they are set.

  Returns:
    True if this process joined a run of several; False if none is set.

  Raises:
    ValueError: naming the variable that is missing or not an integer.
  """
  environ = os.environ if environ is None else environ
  values = {name: environ.get(name, "").strip() for name in ENV_VARS}
  if not any(values.values()):
    return False
  missing = [name for name, value in values.items() if not value]
  if missing:
    raise ValueError(
      f"{', '.join(missing)} not set: a run across processes needs all of "
      f"{', '.join(ENV_VARS)}."
    )
  numbers = []
  for name in ENV_VARS[1:]:
    try:
      numbers.append(int(values[name]))
    except ValueError:
      raise ValueError(f"{name} must be an integer, got {values[name]!r}.") from None
  initialize(values["VAELLS_COORDINATOR"], *numbers)
  return True


def is_main() -> bool:
  """Whether this is process 0, the one that writes the workdir."""
  return jax.process_index() == 0


def broadcast_from_main(tree):
  """Process 0's ``tree`` on every process (host arrays); ``tree`` unchanged
  on one process."""
  if jax.process_count() == 1:
    return tree
  return multihost_utils.broadcast_one_to_all(tree)


def host_local(tree):
  """A replicated ``tree`` as arrays on this process's first device, for work
  that one process does alone (a checkpoint, the evaluation); ``tree``
  unchanged on one process."""
  if jax.process_count() == 1:
    return tree
  return jax.device_put(jax.device_get(tree), jax.local_devices()[0])


def checkpointable(tree):
  """A replicated ``tree`` as host (numpy) arrays, which process 0 saves or
  restores alone (orbax refuses arrays that are neither global nor of a
  single process); ``tree`` unchanged on one process."""
  if jax.process_count() == 1:
    return tree
  return jax.device_get(tree)


def replicate(tree, mesh: jax.sharding.Mesh):
  """``tree`` replicated over every device of ``mesh``.

  Across processes ``tree`` must hold the same values on every process (as
  :func:`broadcast_from_main` returns); each process places only its own
  devices' copies. (``jax.device_put`` would first compare the values
  across processes, one small compiled program per array shape.)
  """
  replicated = NamedSharding(mesh, PartitionSpec())
  if jax.process_count() == 1:
    return jax.device_put(tree, replicated)

  def place(x):
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, replicated, lambda i: x[i])

  return jax.tree_util.tree_map(place, tree)
