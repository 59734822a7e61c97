"""The optimiser of a VAELLS run: optax end to end.

One :func:`optax.partition` over the parameter groups

* ``"net"`` (encoder, decoder): Adam, ``lr_net``, b1 = 0.5, b2 = 0.999;
* ``"anchor"``: Adam, ``lr_anchor`` (or nothing when anchors are fixed);
  both rates times :func:`cooldown`'s factor when ``lr_net_cooldown > 0``;
* ``"psi"``: :func:`accept_reject_step`, the paper's ``Psi`` step,

each gated by the phase of the schedule (:func:`phase_gated`), all inside
:func:`optax.apply_if_finite` (:func:`skip_if_not_finite`), which skips a
step whose gradient is not finite (no group moves, no optimiser state
changes) and counts such steps.

On a CPU both skips (a non-finite step, a step that tries no ``Psi``) are
conditionals; on a GPU or TPU, where a conditional reads its predicate on
the host, both sides are computed and one is selected (``backend.per_platform``).

The update takes extra keyword arguments (optax's ``GradientTransformationExtraArgs``
protocol), forwarded to every group: ``update_net`` and ``update_psi``
(scalar bools: which groups move at this step), ``step`` (the step number),
``value`` (the ``Psi`` part of the objective at the current parameters) and
``value_fn`` (that objective at other parameters of the ``"psi"`` group).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from vaells_jax.config import Config
from vaells_jax.core import backend

__all__ = [
  "SkippedSteps",
  "AcceptRejectState",
  "PSI_LATE_DECAY",
  "PSI_RATE_FACTOR",
  "accept_reject_step",
  "make_optimizer",
  "phase_gated",
  "psi_step_state",
  "skip_if_not_finite",
]

PSI_RATE_FACTOR = 0.99
PSI_LATE_DECAY = 0.9992
_NEVER = 2**31 - 1  # apply_if_finite: never give up and apply a non-finite step

LABELS = {"encoder": "net", "decoder": "net", "anchors": "anchor", "psi": "psi"}


class AcceptRejectState(NamedTuple):
  """State of :func:`accept_reject_step`.

  Attributes:
    lr: the current rate, scalar float32.
    rejected: rejected steps so far.
    attempted: steps tried so far.
  """

  lr: jax.Array
  rejected: jax.Array
  attempted: jax.Array


def accept_reject_step(
  learning_rate: float, max_learning_rate: float, decay_start: int = -1
) -> optax.GradientTransformationExtraArgs:
  """The paper's ``Psi`` step: a gradient step, kept if it does not raise the objective.

  ``update(grads, state, params, *, value, value_fn, update_psi, step)``
  proposes ``params - lr * grads`` and evaluates ``value_fn`` there (the
  transport-operator part of the objective, with the same samples and
  coefficients as ``value``). Accepted when that is finite and
  ``<= value``: the update is the step and ``lr <- min(lr / 0.99,
  max_learning_rate)``. Otherwise the update is zero and ``lr <- 0.99 lr``.
  With ``update_psi`` false nothing is tried (zero update, rate kept). From
  ``step >= decay_start`` (when ``>= 0``) the rate also shrinks by 0.9992
  at every step.

  Args:
    learning_rate: starting rate.
    max_learning_rate: cap of the growing rate.
    decay_start: step of the late decay; -1: never.

  Returns:
    An ``optax.GradientTransformationExtraArgs``.
  """

  def init(params):
    del params
    zero = jnp.zeros((), jnp.int32)
    return AcceptRejectState(jnp.asarray(learning_rate, jnp.float32), zero, zero)

  def update(
    updates, state, params=None, *, value, value_fn, update_psi, step, **extra
  ):
    del extra
    if params is None:
      raise ValueError("accept_reject_step needs params (to evaluate value_fn).")
    step_tree = jax.tree_util.tree_map(lambda g: -state.lr * g, updates)
    proposed = optax.apply_updates(params, step_tree)
    new_value = backend.per_platform(
      lambda: jax.lax.cond(update_psi, lambda: value_fn(proposed), lambda: value),
      lambda: jnp.where(update_psi, value_fn(proposed), value),
    )
    accept = update_psi & jnp.isfinite(new_value) & (new_value <= value)
    grow = jnp.minimum(state.lr / PSI_RATE_FACTOR, max_learning_rate)
    lr = jnp.where(
      update_psi, jnp.where(accept, grow, state.lr * PSI_RATE_FACTOR), state.lr
    )
    if decay_start >= 0:
      lr = jnp.where(step >= decay_start, lr * PSI_LATE_DECAY, lr)
    step_tree = jax.tree_util.tree_map(
      lambda u: jnp.where(accept, u, jnp.zeros_like(u)), step_tree
    )
    return step_tree, AcceptRejectState(
      lr,
      state.rejected + (update_psi & ~accept).astype(jnp.int32),
      state.attempted + update_psi.astype(jnp.int32),
    )

  return optax.GradientTransformationExtraArgs(init, update)


def phase_gated(
  inner: optax.GradientTransformation, flag: str
) -> optax.GradientTransformationExtraArgs:
  """``inner``, applied only at steps where the extra argument ``flag`` is true.

  Elsewhere the update is zero and ``inner``'s state does not change. The
  flag is a traced scalar bool, so a schedule never recompiles the step.
  """
  inner = optax.with_extra_args_support(inner)

  def update(updates, state, params=None, **extra):
    active = extra[flag]
    new_updates, new_state = inner.update(updates, state, params, **extra)
    select = lambda a, b: jax.tree_util.tree_map(  # noqa: E731
      lambda x, y: jnp.where(active, x, y), a, b
    )
    return (
      select(new_updates, jax.tree_util.tree_map(jnp.zeros_like, updates)),
      select(new_state, state),
    )

  return optax.GradientTransformationExtraArgs(inner.init, update)


def skip_if_not_finite(
  inner: optax.GradientTransformation,
) -> optax.GradientTransformationExtraArgs:
  """``optax.apply_if_finite(inner)`` that never gives up: a step whose gradient
  is not finite everywhere is always skipped (zero update, state kept).

  On a GPU or TPU the inner update is always computed and kept or dropped by
  a select, not a conditional (the same state, ``optax.ApplyIfFiniteState``).
  """
  inner = optax.with_extra_args_support(inner)
  on_cpu = optax.apply_if_finite(inner, _NEVER)

  def update(updates, state, params=None, **extra):
    def selected():
      finite = jnp.all(
        jnp.array(
          [jnp.all(jnp.isfinite(u)) for u in jax.tree_util.tree_leaves(updates)]
        )
      )
      new_updates, inner_state = inner.update(
        updates, state.inner_state, params, **extra
      )
      keep = functools.partial(optax.tree_utils.tree_where, finite)
      return keep(new_updates, optax.tree_utils.tree_zeros_like(updates)), (
        optax.ApplyIfFiniteState(
          notfinite_count=jnp.where(
            finite,
            jnp.zeros([], jnp.int32),
            optax.safe_increment(state.notfinite_count),
          ),
          last_finite=finite,
          total_notfinite=jnp.where(
            finite, state.total_notfinite, optax.safe_increment(state.total_notfinite)
          ),
          inner_state=keep(inner_state, state.inner_state),
        )
      )

    return backend.per_platform(
      lambda: on_cpu.update(updates, state, params, **extra), selected
    )

  return optax.GradientTransformationExtraArgs(on_cpu.init, update)


def cooldown(config: Config):
  """The factor on ``lr_net`` and ``lr_anchor`` at a step: rising from 0 to
  1 over the first ``config.lr_net_warmup`` steps, then 1, then, over the
  last ``config.lr_net_cooldown`` of ``config.num_steps``, down to 0 along a
  cosine (``step -> factor``, traceable). None when the rates are constant."""
  if config.lr_net_cooldown == 0 and config.lr_net_warmup == 0:
    return None
  length = max(1, round(config.lr_net_cooldown * config.num_steps))
  start = config.num_steps - length if config.lr_net_cooldown else config.num_steps
  rise = max(1, config.lr_net_warmup)

  def factor(step):
    done = jnp.clip((step - start) / length, 0.0, 1.0)
    return jnp.minimum(1.0, (step + 1) / rise) * 0.5 * (1 + jnp.cos(jnp.pi * done))

  return factor


def scale_by_step(factor) -> optax.GradientTransformationExtraArgs:
  """Multiplies the updates by ``factor(step)``, ``step`` the extra argument."""

  def update(updates, state, params=None, *, step, **extra):
    del params, extra
    return jax.tree_util.tree_map(lambda u: u * factor(step), updates), state

  return optax.GradientTransformationExtraArgs(lambda _: optax.EmptyState(), update)


def make_optimizer(config: Config) -> optax.GradientTransformationExtraArgs:
  """The optimiser of every parameter group of a VAELLS run (module docstring)."""
  factor = cooldown(config)

  def adam(lr):
    inner = optax.adam(lr, b1=0.5, b2=0.999)
    return inner if factor is None else optax.chain(inner, scale_by_step(factor))

  anchor_opt = adam(config.lr_anchor) if config.learn_anchors else optax.set_to_zero()
  groups = optax.partition(
    {
      "net": phase_gated(adam(config.lr_net), "update_net"),
      "anchor": phase_gated(anchor_opt, "update_net"),
      "psi": accept_reject_step(
        config.lr_psi, config.max_lr_psi, config.psi_lr_decay_start
      ),
    },
    LABELS,
  )
  return skip_if_not_finite(groups)


def psi_step_state(opt_state: Any) -> AcceptRejectState:
  """The :class:`AcceptRejectState` inside :func:`make_optimizer`'s state."""
  return opt_state.inner_state.inner_states["psi"].inner_state


class SkippedSteps:
  """Properties of a training state whose ``opt_state`` is
  :func:`skip_if_not_finite`'s: the steps skipped for a non-finite loss or
  gradient (nothing moved)."""

  @property
  def net_skipped(self) -> jax.Array:
    """Skipped steps so far."""
    return self.opt_state.total_notfinite

  @property
  def bad_streak(self) -> jax.Array:
    """Consecutive skipped steps up to this one; 0 after a good step."""
    return self.opt_state.notfinite_count
