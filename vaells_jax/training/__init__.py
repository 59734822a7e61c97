"""Training: the optax optimiser of the parameter groups, the jitted steps of
VAELLS and the baselines, the training loop and checkpoints. Imports the
models, the math and the data; never the evaluation."""
