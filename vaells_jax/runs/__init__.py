"""Whole runs above training and evaluation: ``train_and_evaluate``, the
comparison of VAELLS with the baselines, and ``fit`` on a user's arrays."""
