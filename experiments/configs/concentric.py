"""Concentric circles: paper appendix F, table 4."""

from vaells_jax.config import Config

# The reference code multiplies zeta4 and zeta5 by its "weight on prior terms
# during net update steps" even without alternation (SPEC section 4), so its
# effective prior weights were 0.01 and 1e-4. We default to the paper's table
# (factor 1): with it the circles come out separated (knn accuracy 1.0); with
# the reference code's 0.01 they came out distorted and mixed (0.93). Both are
# measured in the README; override with --config.prior_weight_net=0.01.
PRIOR_WEIGHT = 1.0

# Population training (vaells_jax.training.population): a single run learns
# the circles on about half of its dictionary draws (19 of 40, seeds 0-9)
# and on 2 of the fresh seeds 100-109. 8 draws trained together for the
# first half of the steps, the one whose dominant operator's orbits pass the
# most of its class's encodings (latent_coverage, no ground truth) kept,
# learned them on 20 of 20 fresh seeds (100-119); selected at a quarter of
# the steps on 18 of 20: on seeds 102 and 104 no draw had begun to rotate by
# then (docs/experiments.md, "Population training").
POPULATION = 8


def get_config(budget: str = "paper") -> Config:
  if budget != "paper":
    raise ValueError(
      "concentric has only the paper budget (it runs on a CPU in minutes)."
    )
  return Config(
    num_steps=4000,
    batch_size=30,
    latent_dim=2,
    num_ops=4,
    num_samples=1,
    lr_net=0.005,
    lr_anchor=1e-4,
    learn_anchors=True,
    lr_psi=4e-4,
    max_lr_psi=0.1,
    zeta1=0.01,
    zeta2=1.0,
    zeta3=1.0,
    zeta4=1.0,
    zeta5=0.01,
    zeta_q=1e-6,
    zeta_p=5e-6,
    eta=0.01,
    gamma=1e-3,
    warmup_steps=0,
    alternate=False,
    num_restarts=1,
    closest_anchor=False,
    latent_scale=1.0,
    prior_weight_net=PRIOR_WEIGHT,
    # Damped Gauss-Newton (vaells_jax.core.gauss_newton): with four
    # operators on 2-D codes the objective has a valley that only the small
    # l1 weight tilts; Gauss-Newton reaches its bottom in a median of about
    # 20 steps where proximal gradient needs 100-300 iterations. On a
    # training step's real pairs (steps 500-3000) it ends as low as the
    # original method on 120 of 120 (pgd with 300 iterations: 114-119;
    # docs/benchmarks.md, "Gauss-Newton for 2-D codes").
    inference_method="gauss_newton",
    inference_max_iter=100,
    population=POPULATION,
    select_at=0.5,
    select_signal="latent_coverage",
  )
