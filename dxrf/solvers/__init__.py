"""Numerics without estimators: ridge paths, the landmark-basis solve, logistic and SGD passes."""

from dxrf.solvers.ridge_path import RidgePath, mse_from_stats, ridge_path, solve_ridge

__all__ = ["RidgePath", "mse_from_stats", "ridge_path", "solve_ridge"]
