"""A search's table of results, in scikit-learn's ``cv_results_`` layout, and its choice."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.stats import rankdata

from dxrf.search.grid import SearchGrid

__all__ = ["results_table", "best_index", "warn_at_edges", "format_table"]


def results_table(
    grid: SearchGrid,
    bandwidth_values: list[float],
    mse: list,
    r2: list,
    accuracy: list | None = None,
    train_mse: list | None = None,
    train_score: list | None = None,
    evidence: bool = False,
) -> dict:
    """``cv_results_``: one entry per (bandwidth, variant, M, alpha), in that nesting order.

    ``mse[b]``, ``r2[b]`` (and ``accuracy[b]``) have shape (folds, variants,
    M, alphas) for bandwidth ``b``. The test score is the R^2, or the
    accuracy when it is given; both are also kept under their own names.
    ``train_mse`` and ``train_score`` (the test score's measure on each
    fold's training rows), when given, become ``splitJ_train_mse``,
    ``mean_train_mse``, ``splitJ_train_score``, ``mean_train_score`` and
    ``std_train_score`` (scikit-learn's ``return_train_score``).
    ``bandwidth_value`` is NaN for lengthscales (their ``param_bandwidth`` is
    a compact label; the chosen ones are the search's ``bandwidth_``).
    ``evidence`` (``cv="evidence"``): ``r2`` holds each configuration's log
    evidence on all rows, the test score, also kept as ``mean_test_evidence``;
    the validation MSE is NaN (there are no validation rows).
    """
    mse_all = np.stack(mse, axis=1)  # (F, B, V, M, P)
    folds = mse_all.shape[0]
    mse_flat = mse_all.reshape(folds, -1)
    r2_only = np.stack(r2, axis=1).reshape(folds, -1)
    acc_flat = None if accuracy is None else np.stack(accuracy, axis=1).reshape(folds, -1)
    r2_flat = r2_only if acc_flat is None else acc_flat
    params, bw, bwv, sel, lam, rho, ms, alphas = [], [], [], [], [], [], [], []
    for spec, value in zip(grid.bandwidths, bandwidth_values):
        for var in grid.variants:
            for m in grid.n_components:
                for a in grid.alphas:
                    p = {"bandwidth": spec.text, "selection": var.selection, "n_components": int(m), "alpha": float(a)}
                    if var.lam is not None:
                        p["lam"] = var.lam
                    if var.rho is not None:
                        p["rho"] = var.rho
                    params.append(p)
                    bw.append(spec.text)
                    bwv.append(np.nan if np.ndim(value) else value)
                    sel.append(var.selection)
                    lam.append(var.lam)
                    rho.append(var.rho)
                    ms.append(int(m))
                    alphas.append(float(a))
    mean_score = r2_flat.mean(axis=0)
    out = {
        "params": params,
        "param_bandwidth": np.array(bw, dtype=object),
        "param_selection": np.array(sel, dtype=object),
        "param_lam": np.array(lam, dtype=object),
        "param_rho": np.array(rho, dtype=object),
        "param_n_components": np.array(ms, dtype=np.int64),
        "param_alpha": np.array(alphas, dtype=np.float64),
        "bandwidth_value": np.array(bwv, dtype=np.float64),
        "mean_test_score": mean_score,
        "std_test_score": r2_flat.std(axis=0),
        "mean_validation_mse": mse_flat.mean(axis=0),
        # rank 1 is the best; ties share the lowest rank, and unknown (NaN) scores come last, as in scikit-learn
        "rank_test_score": rankdata(-np.nan_to_num(np.round(mean_score, 12), nan=-np.inf), method="min").astype(np.int32),
    }
    named = {"r2": r2_only} if acc_flat is None else {"r2": r2_only, "accuracy": acc_flat}
    if evidence:
        out["mean_test_evidence"] = mean_score
        out["split0_test_evidence"] = r2_flat[0]
    if acc_flat is not None:
        for name, values in named.items():
            out[f"mean_test_{name}"] = values.mean(axis=0)
    if train_mse is not None:
        tmse = np.stack(train_mse, axis=1).reshape(folds, -1)
        tscore = np.stack(train_score, axis=1).reshape(folds, -1)
        out["mean_train_score"] = tscore.mean(axis=0)
        out["std_train_score"] = tscore.std(axis=0)
        out["mean_train_mse"] = tmse.mean(axis=0)
        for j in range(folds):
            out[f"split{j}_train_score"] = tscore[j]
            out[f"split{j}_train_mse"] = tmse[j]
    for j in range(folds):
        out[f"split{j}_test_score"] = r2_flat[j]
        out[f"split{j}_validation_mse"] = mse_flat[j]
        if acc_flat is not None:
            for name, values in named.items():
                out[f"split{j}_test_{name}"] = values[j]
    return out


def best_index(results: dict) -> int:
    """The configuration with the highest mean validation score (NaN scores never).

    Equal scores (to 12 decimals, as ``rank_test_score`` ranks them) are
    told apart by the lower mean validation MSE, then by order. Accuracy ties
    often: on MNIST the penalties 1e-10, 1e-9 and 1e-8 classified the same
    validation digits, and the first of them, the grid's edge, was taken
    although the largest fitted the class columns best.
    """
    score = results["mean_test_score"]
    if np.isnan(score).all():
        raise ValueError(
            "every configuration's validation error is lost to rounding (huge coefficients on nearly singular "
            "statistics): use larger alphas, or dtype='float64' features"
        )
    rounded = np.round(np.nan_to_num(score, nan=-np.inf), 12)
    tied = np.flatnonzero(rounded == rounded.max())
    mse = results.get("mean_validation_mse")
    if mse is None or tied.size == 1:
        return int(tied[0])
    mse = np.nan_to_num(np.asarray(mse, dtype=np.float64)[tied], nan=np.inf)
    return int(tied[np.argmin(mse)])


def warn_at_edges(grid: SearchGrid, best: dict, bandwidth_values: list, chosen_bandwidth: object) -> list[str]:
    """Warn (``UserWarning``) for each searched numeric axis whose chosen value is at its end."""
    # lengthscales are no point of a numeric axis: only numbers are checked, when one was chosen
    numbers = [v for v in bandwidth_values if np.ndim(v) == 0]
    axes = [("bandwidths", np.asarray(numbers), chosen_bandwidth)] if np.ndim(chosen_bandwidth) == 0 else []
    axes += [
        ("n_components", grid.n_components, best["n_components"]),
        ("alphas", grid.alphas, best["alpha"]),
    ]
    lams = sorted({v.lam for v in grid.variants if v.lam is not None})
    rhos = sorted({v.rho for v in grid.variants if v.rho is not None})
    if "lam" in best:
        axes.append(("lams", np.asarray(lams), best["lam"]))
    if "rho" in best:
        axes.append(("rhos", np.asarray(rhos), best["rho"]))
    said = []
    for name, values, chosen in axes:
        values = np.unique(np.asarray(values, dtype=np.float64))
        if values.size < 2:
            continue
        if np.isclose(chosen, values[0], rtol=1e-12, atol=0):
            end = "smallest"
        elif np.isclose(chosen, values[-1], rtol=1e-12, atol=0):
            end = "largest"
        else:
            continue
        msg = f"the chosen {name[:-1] if name != 'n_components' else 'n_components'}={chosen:.6g} is the {end} of {name}; extend the grid beyond it"
        warnings.warn(msg, UserWarning, stacklevel=6)  # warn_at_edges, _chosen, run_search, _search, fit
        said.append(msg)
    return said


def format_table(results: dict, top: int = 20, score: str = "R^2") -> str:
    """The best ``top`` configurations, best first, as fixed-width text."""
    order = np.argsort(results["rank_test_score"], kind="stable")[:top]
    texts = {}
    for i in order:
        bw, value = results["param_bandwidth"][i], results["bandwidth_value"][i]
        # a number; a median multiple with its value; lengthscales by their compact label (no single value)
        texts[i] = f"{bw:.4g}" if not isinstance(bw, str) else bw if np.isnan(value) else f"{bw}={value:.3g}"
    width = max([12] + [len(t) for t in texts.values()])
    lines = [f"{'rank':>4}  {'bandwidth':>{width}}  {'selection':>11}  {'lam/rho':>8}  {'M':>6}  {'alpha':>9}  "
             f"{'valid ' + score:>10}  {'valid MSE':>10}"]
    for i in order:
        extra = results["param_lam"][i] if results["param_lam"][i] is not None else results["param_rho"][i]
        extra = "-" if extra is None else f"{extra:.3g}"
        bw_text = texts[i]
        lines.append(
            f"{results['rank_test_score'][i]:>4}  {bw_text:>{width}}  {results['param_selection'][i]:>11}  {extra:>8}  "
            f"{results['param_n_components'][i]:>6}  {results['param_alpha'][i]:>9.3g}  "
            f"{results['mean_test_score'][i]:>10.5f}  {results['mean_validation_mse'][i]:>10.5g}"
        )
    return "\n".join(lines)

