"""Learners on random features: solves on accumulated statistics."""

from .ridge_path import RidgePath, mse_from_stats, ridge_path, solve_ridge

__all__ = ["RidgePath", "ridge_path", "solve_ridge", "mse_from_stats"]
