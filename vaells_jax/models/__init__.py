"""Models: the encoder/decoder networks, the VAELLS model (posterior samples,
step inference, loss terms) and the baselines (VAE, VampPrior, hyperspherical
VAE with its von Mises-Fisher distribution)."""
