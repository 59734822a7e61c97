"""The paper configurations, one module per experiment with
``get_config(budget)``: they live in the package (``vaells_jax.experiments``)
so that an installed ``vaells-run`` has them; imported here by name."""

from vaells_jax.experiments import concentric, nat_mnist, rot_mnist, swiss_roll

__all__ = ["concentric", "nat_mnist", "rot_mnist", "swiss_roll"]
