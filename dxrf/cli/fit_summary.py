"""What ``dxrf fit`` prints about the model it fitted: a plain fit's plan and path, or a search's table and stages."""

from __future__ import annotations

import argparse

import dask.array as da
import numpy as np

__all__ = ["fitted_bandwidth", "print_fit", "print_search"]


def fitted_bandwidth(model: object) -> float | np.ndarray | None:
    """A fitted model's bandwidth: its features' ``bandwidth_``, else its kernel's lengthscales, else None."""
    bandwidth = getattr(getattr(model, "features_", None), "bandwidth_", None)
    if bandwidth is None:
        bandwidth = getattr(getattr(model, "kernel_", None), "lengthscales", None)
    return bandwidth


def print_fit(model: object, args: argparse.Namespace, X: da.Array, elapsed: float, select: str) -> None:
    """What ``dxrf fit`` prints after a plain fit (``select``: the selection taken)."""
    from dxrf.features.maps import format_bandwidth

    print(f"model:        {type(model).__name__} on {model.kernel_.n_components} features ({args.features}, select={select})")
    print(f"rows:         {X.shape[0]} x {X.shape[1]}")
    bandwidth = fitted_bandwidth(model)
    if bandwidth is not None:
        print(f"bandwidth:    {format_bandwidth(bandwidth)}")
    print(f"passes:       {model.n_passes_} over the data in {elapsed:.1f} s")
    estimate = getattr(model, "plan_estimate_", None)
    if estimate is not None:  # a Nyström ridge: the plan taken and the estimate it was chosen by
        cg = f", {model.n_iter_} CG iterations" if model.solver_ == "pcg" else ""
        print(f"plan:         {model.solver_} (estimate {estimate['gram_ops']:.3g} Gram vs {estimate['pcg_ops']:.3g} CG "
              f"operations{cg})")
    if getattr(model, "feature_cache_", None) is not None:
        print(f"features:     {model.feature_cache_} between passes ({model.feature_cache_bytes_ / 2**20:.1f} MiB)")
    if getattr(model, "alphas_", None) is not None:
        for a, err in zip(model.alphas_, model.validation_errors_):
            mark = "  <- chosen" if a == model.alpha_ else ""
            print(f"  alpha {a:9.3g}: validation MSE {err:.6g}{mark}")
    elif getattr(model, "validation_errors_", None) is not None:
        print(f"validation:   {np.ravel(model.validation_errors_)[-1]:.6g} (MSE)")
    if hasattr(model, "train_mse_"):
        print(f"training MSE: {model.train_mse_:.6g}")
    print(f"saved:        {args.out}")


def print_search(model: object, X: da.Array, elapsed: float, out: str, classification: bool) -> None:
    """What ``dxrf fit`` prints after a search: the table, the choice, the growth's stages and the plan."""
    from dxrf.features.maps import format_bandwidth
    from dxrf.search import format_table

    res = model.cv_results_
    what = "accuracy" if classification else "R^2"
    evidence = isinstance(model.cv, str) and model.cv == "evidence"
    folds = f"{model.n_splits_}-fold" if model.n_splits_ > 1 else "hold-out"
    if evidence:
        print(f"search:       {len(res['params'])} configurations on all rows, scored by the log evidence")
    else:
        print(f"search:       {len(res['params'])} configurations, {folds} validation, scored by {what}")
    print(format_table(res, top=20, score="acc" if classification else "log-ev" if evidence else "R^2"))
    p = model.best_params_
    chosen = ", ".join(f"{k}={v}" for k, v in p.items())
    print(f"chosen:       {chosen} (bandwidth {format_bandwidth(model.bandwidth_)})")
    mse = res["mean_validation_mse"][model.best_index_]
    if evidence:
        print(f"evidence:     log marginal likelihood {model.best_score_:.6g}, noise variance {np.mean(model.noise_):.6g}")
    elif classification:
        print(f"validation:   accuracy {model.best_score_:.6f}, MSE of the +-1 class columns {mse:.6g}")
    else:
        print(f"validation:   R^2 {model.best_score_:.6f}, MSE {mse:.6g}")
    growth = getattr(model, "growth_", None)
    if growth:
        for i, stage in enumerate(growth["stages"]):
            losses = ", ".join(f"M={m}: {v:.4g}" for m, v in zip(stage["n_components"], stage["validation_loss"]))
            mark = "  <- chosen" if i == growth["chosen_stage"] else ""
            cg = ", conjugate gradient" if stage.get("solver") == "pcg" else ""
            print(f"stage {i + 1}:      {losses} (1 - score; {stage['bandwidths']} bandwidth"
                  f"{'s' if stage['bandwidths'] != 1 else ''}, {stage['seconds']:.1f} s{cg}){mark}")
        print(f"stopped:      {growth['stop_reason']}")
    estimate = getattr(model, "search_plan_estimate_", None)
    if estimate is not None:  # a Nystrom search that either plan could solve: the one taken, and why
        print(f"plan:         {model.search_solver_} (estimate {estimate['gram_ops']:.3g} Gram vs "
              f"{estimate['pcg_ops']:.3g} CG operations)")
    print(f"model:        {type(model).__name__} on {model.kernel_.n_components} features, refitted on all rows")
    print(f"rows:         {X.shape[0]} x {X.shape[1]}")
    print(f"passes:       {model.n_passes_} over the data in {elapsed:.1f} s")
    print(f"saved:        {out}")
