"""The math: transport operators, expm, Laplace sampling, coefficient inference,
the objective's terms. Pure functions of arrays and keys; nothing here knows
about networks, training or data."""
