"""Evaluation: metrics, the importance-sampled log-likelihood, the digit
classifier, the reports of synthetic and image runs and their figures."""
