"""Swiss roll: paper appendix E, table 3 (what differs from the concentric
defaults).

Whether the operator learns to traverse the roll depends on the initial
draw (paper appendix "Analysis of sensitivity to anchor points"): a single
run traverses it on about one draw in five (21% of 80 members, seeds 0-9;
3 of the fresh seeds 100-109). The default trains 16 members, each with its
own networks, anchors and dictionary, to the end in one step, and keeps the
one whose decoded orbit from an anchor passes the most of the training data
without leaving it (``data_coverage``; ties: the member whose decoded prior
samples lie nearest the data; no ground truth). With 8 members no member
traversed the roll on 3 of seeds 100-119; with 16, 98 of seeds 100-199
have one, and the rate is set mostly by which member the signal keeps.
Damped Gauss-Newton (``gauss_newton``) solves the step's pairs as low as
the original method (150 of 150 at step 1000) in about half the time of
``pgd``. Success rates: docs/studies/population-swiss-roll.md, "Which member is
kept"; ``--config.population=1`` is a single run.
"""

from vaells_jax.config import Config

# docs/studies/population-swiss-roll.md, "Sixteen members, kept by both radii".
POPULATION = 16


def get_config(budget: str = "paper") -> Config:
  if budget != "paper":
    raise ValueError(
      "swiss_roll has only the paper budget (it runs on a CPU in minutes)."
    )
  return Config(
    num_steps=3000,
    num_ops=1,
    lr_net=1e-4,
    lr_psi=5e-5,
    max_lr_psi=0.05,
    zeta_p=5e-5,
    alternate=True,
    prior_weight_net=0.01,
    recon_weight_psi=0.001,
    num_restarts=2,
    closest_anchor=True,
    inference_method="gauss_newton",
    population=POPULATION,
    population_init="all",
    select_at=1.0,
    # docs/studies/population-swiss-roll.md, "Which member is kept".
    select_signal="data_coverage",
  )
