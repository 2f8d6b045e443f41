"""`dxrf fit`, `dxrf predict` and `dxrf evaluate`: models on zarr data from the command line."""

from __future__ import annotations

import argparse
import time
import warnings

import dask
import dask.array as da
import numpy as np

from dxrf.io.storage import resolve
from dxrf.cli.arguments import comma_items, lasting_destination, positive_int, seconds, storage_options
from dxrf.cli.fit_summary import print_fit, print_search

__all__ = ["add_model_commands", "build_features", "build_model"]

FEATURE_MAPS = ("rff", "relu", "maxout", "linear", "nystroem")
SELECTIONS = ("none", "elss", "elss-sample", "elss-top", "eerf", "lkrf", "lkrf-top")
MODELS = ("ridge", "logistic", "multinomial", "sgd")
# options that are grids in a search; given none of them, `dxrf fit` runs the default search
GRID_OPTIONS = ("bandwidth", "n_components", "select", "lam", "rho", "alphas", "alpha", "method", "cv")


def _numbers(text: str, kind: type, what: str) -> list:
    values = []
    for v in comma_items(text, what):
        try:
            values.append(kind(v))
        except ValueError:
            # argparse's own wording for one bad value
            raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {v!r}") from None
    return values


def _float_list(text: str) -> list[float]:
    return _numbers(text, float, "numbers")


def _int_list(text: str) -> list[int]:
    return _numbers(text, int, "integers")


def _bandwidths(text: str) -> list[float | str]:
    from dxrf.search import parse_bandwidth

    items = comma_items(text, "bandwidths")
    out: list[float | str] = []
    for v in items:
        try:
            out.append(float(v))  # its range is checked where it is used, in the estimator's words
            continue
        except ValueError:
            pass
        try:
            out.append(parse_bandwidth(v).text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"bandwidth must be numbers or 'median', 'median*c' (c > 0), comma-separated, got {text!r}"
            ) from None
    return out


def _select_list(text: str) -> list[str]:
    values = comma_items(text, "selections")
    bad = [v for v in values if v not in SELECTIONS]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"--select takes a comma-separated list of {', '.join(SELECTIONS)}; got {text!r}")
    return values


def _cv(text: str) -> int | float | str:
    if text == "evidence":
        return text
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--cv takes an integer k >= 2, a fraction in (0, 1) or 'evidence', got {text!r}") from None


def _one(args: argparse.Namespace, name: str, default: object) -> object:
    """A grid option's single value for a plain fit (its default when not given)."""
    value = getattr(args, name)
    if value is None:
        return default
    if isinstance(value, list):
        if len(value) != 1:
            raise ValueError(f"--{name.replace('_', '-')} takes one value without a search (give --cv to search)")
        return value[0]
    return value


def is_search(args: argparse.Namespace) -> bool:
    """A search: ``--cv``, several values of a grid option other than ``--alphas``, or (ridge) no grid option.

    ``--alphas`` alone keeps the plain fit's penalty path on a hold-out (``--validation``).
    """
    if args.features != "rff" or args.model not in ("ridge", "logistic", "multinomial"):
        return False
    given = [getattr(args, k) for k in GRID_OPTIONS if getattr(args, k) is not None]
    several = any(len(getattr(args, k) or ()) > 1 for k in ("bandwidth", "n_components", "select", "lam", "rho"))
    return args.cv is not None or several or (args.model == "ridge" and not given)


def _search_selections(args: argparse.Namespace) -> list[str]:
    method = args.method or "sample"
    out = []
    for s in args.select or ["none"]:
        if s == "elss":
            s = f"elss-{method}"
        elif s == "lkrf" and method == "top":
            s = "lkrf-top"
        out.append(s)
    return out


def build_search(args: argparse.Namespace, classification: bool) -> object:
    """The search estimator described by the command-line grids."""
    import dxrf
    from dxrf.learners.search_cv import DEFAULT_ALPHAS

    if args.model in ("logistic", "multinomial") and not classification:
        raise ValueError(f"--model {args.model} needs a classification target (the data's y has no classes)")
    alphas = args.alphas if args.alphas is not None else ([args.alpha] if args.alpha is not None else DEFAULT_ALPHAS)
    cv = args.cv if args.cv is not None else (args.validation if args.validation is not None else "auto")
    common = dict(
        bandwidths=args.bandwidth or "auto",
        n_components=args.n_components or "auto",
        selections=_search_selections(args),
        lams=args.lam or [1e-3],
        rhos=args.rho or [1.0],
        alphas=list(alphas),
        n_candidates=args.n_candidates,
        kernel=args.kernel,
        sampling=args.sampling,
        dtype=args.dtype or "auto",
        cv=cv,
        max_components=args.max_components,
        time_budget=None if args.time_budget == 0 else args.time_budget,
        nystroem_solver=args.solver,
        random_state=args.seed,
    )
    if classification:
        # chosen by validation accuracy: one more pass scores every configuration
        return dxrf.RandomFeatureClassifierCV(
            loss=args.model if args.model in ("logistic", "multinomial") else "squared", scoring="accuracy", **common
        )
    return dxrf.RandomFeatureRidgeCV(store_posterior=args.posterior, **common)


def build_features(args: argparse.Namespace) -> object:
    """The feature map or selector described by the command-line options."""
    import dxrf

    m = _one(args, "n_components", 200)
    select, lam, rho = _one(args, "select", "none"), _one(args, "lam", 1e-3), _one(args, "rho", 1.0)
    bandwidth, method = _one(args, "bandwidth", "median"), args.method or "sample"
    if select in ("elss-sample", "elss-top", "lkrf-top"):
        select, method = select.rsplit("-", 1)
    m0 = args.n_candidates or (10 * m if select != "none" else m)
    common = {"dtype": args.dtype or "float32", "random_state": args.seed}
    if args.features == "nystroem":
        if select != "none":
            raise ValueError("--features nystroem takes no --select (its landmarks are drawn uniformly)")
        # the triangular whitening: the one-penalty solve in the landmark basis, at any M
        return dxrf.NystroemFeatures(m, kernel=args.kernel, bandwidth=bandwidth, whitening="cholesky", **common)
    if args.features == "rff":
        base = dxrf.RandomFourierFeatures(m0, kernel=args.kernel, bandwidth=bandwidth, sampling=args.sampling, **common)
    elif args.features == "relu":
        base = dxrf.RandomReLUFeatures(m0, bandwidth=bandwidth, **common)
    elif args.features == "maxout":
        base = dxrf.RandomMaxoutFeatures(m0, pieces=args.pieces, **common)
    else:
        base = dxrf.RandomLinearSketch(m0, **common)
    if select == "none":
        return base
    if select == "elss":
        return dxrf.LeverageScoreSampler(m, n_candidates=m0, lam=lam, method=method, base=base, random_state=args.seed)
    if select == "eerf":
        return dxrf.EnergyScoreSelector(m, n_candidates=m0, base=base, random_state=args.seed)
    return dxrf.KernelAlignmentSelector(m, n_candidates=m0, rho=rho, method=method, base=base, random_state=args.seed)


def build_model(args: argparse.Namespace, classification: bool) -> object:
    import dxrf

    if args.posterior and (classification or args.model != "ridge"):
        raise ValueError("--posterior keeps the posterior of a ridge regression (a numeric target with --model ridge): "
                         "a classifier has no predictive standard deviation")
    if is_search(args):
        if args.features == "nystroem":
            raise ValueError("--features nystroem is for a plain fit (one --n-components, no --cv)")
        return build_search(args, classification)
    features = build_features(args)
    alphas = args.alphas
    alpha = 1e-3 if args.alpha is None else args.alpha
    if args.model == "ridge":
        if classification:
            return dxrf.RandomFeatureClassifier(features, alpha=alpha, alphas=alphas, validation=args.validation,
                                                random_state=args.seed, solver=args.solver)
        return dxrf.RandomFeatureRidge(features, alpha=alpha, alphas=alphas, validation=args.validation,
                                       store_posterior=args.posterior, random_state=args.seed, solver=args.solver)
    if args.model in ("logistic", "multinomial"):
        if not classification:
            raise ValueError(f"--model {args.model} needs a classification target (the data's y has no classes)")
        if alphas:
            raise ValueError(f"--alphas is for --model ridge; give --alpha for {args.model}")
        return dxrf.RandomFeatureClassifier(features, loss=args.model, alpha=alpha, random_state=args.seed)
    try:
        from dxrf.learners.sgd import (
            RandomFeatureSGDClassifier,
            RandomFeatureSGDRegressor,
        )
    except ImportError:  # pragma: no cover - shipped with the package
        raise ValueError("--model sgd is not available in this installation") from None
    cls = RandomFeatureSGDClassifier if classification else RandomFeatureSGDRegressor
    return cls(features, validation=args.validation or 0.2, random_state=args.seed)


def _open(path: str, metadata: dict | None = None, options: dict | None = None):
    import dxrf.io
    from dxrf.io.dataset import check_column_stats

    data = _open_data(path, options)
    if metadata:
        _check_columns(data, metadata, path)  # by name, before the count is compared below
    X = data.X
    if metadata and metadata.get("x_mean") is not None:
        mean = np.asarray(metadata["x_mean"], dtype=np.float32)
        std = np.asarray(metadata["x_std"], dtype=np.float32)
        if mean.shape[0] != X.shape[1]:
            raise ValueError(f"{path} has {X.shape[1]} columns but the model was fitted on {mean.shape[0]}")
        check_column_stats(mean, std, "the model's standardisation", metadata.get("columns"))
        X = (X - mean) / std
    return data, X


def _check_columns(data, metadata: dict, path: str) -> None:
    expected = metadata.get("columns")
    if expected is not None and list(data.columns) != list(expected):
        missing = [c for c in expected if c not in set(data.columns)]
        extra = [c for c in data.columns if c not in set(expected)]
        parts = [f"{len(missing)} missing: {_few(missing)}"] * bool(missing) + [f"{len(extra)} extra: {_few(extra)}"] * bool(extra)
        detail = "; ".join(parts) or "they are in another order"
        raise ValueError(
            f"{path} does not have the model's {len(expected)} columns ({detail}); ingest it again "
            "with the training levels: dxrf ingest SRC DEST --levels-from TRAIN.zarr"
        )


def _few(names: list, k: int = 5) -> str:
    return ", ".join(map(repr, names[:k])) + (f" and {len(names) - k} more" if len(names) > k else "")


def _check_two_classes(data, path: str) -> None:
    """Refuse a target with fewer than two classes present, naming the class by its label (not its code)."""
    counts = data.attrs.get("class_counts")
    if counts is None or len(counts) != len(data.classes):
        return  # the estimator's own check runs on the codes
    present = [(c, int(n)) for c, n in zip(data.classes, counts) if n > 0]
    if len(present) < 2:
        label, n = present[0] if present else (None, 0)
        raise ValueError(
            f"{path}: the target {data.attrs.get('target')!r} has only one class, {label!r} (all {n} rows); "
            f"a classifier needs at least two"
        )


def _check_out(args: argparse.Namespace, kind: str = "model") -> None:
    """Refuse ``--out`` before any pass: a destination that would be refused at the end is refused now."""
    from dxrf.io.storage import check_any_destination

    check_any_destination(args.out, kind=kind, overwrite=args.overwrite, storage_options=storage_options(args))


def _check_predictions_out(args: argparse.Namespace) -> None:
    from dxrf.io.predictions import prediction_format

    _check_out(args, "predictions" if prediction_format(args.out) == "zarr" else "file")


def _open_data(path: str, options: dict | None):
    """``open_zarr`` with the command's name in the advice for a file that is not a group."""
    import dxrf.io

    try:
        return dxrf.io.open_zarr(path, storage_options=options)
    except ValueError as exc:
        text = str(exc)
        if text.endswith("write it with dxrf.io.ingest"):
            raise ValueError(text.replace("dxrf.io.ingest", f"'dxrf ingest {path} DATA.zarr' first")) from None
        raise


def _fit_inputs(args: argparse.Namespace):
    """The data of ``dxrf fit``, opened and checked (before any cluster starts; kept for the command)."""
    if getattr(args, "_inputs", None) is None:
        _check_out(args)
        data = _open_data(args.data, storage_options(args))
        if data.y is None:
            raise ValueError(f"{args.data} has no target array y; ingest it with --target")
        if data.classes is not None:
            _check_two_classes(data, args.data)
        args._inputs = data
    return args._inputs


def _model_inputs(args: argparse.Namespace, *, need_y: bool):
    """(model, metadata, data, X) of ``predict``/``evaluate``, loaded and checked before any cluster starts."""
    import dxrf

    if getattr(args, "_inputs", None) is None:
        model, metadata = dxrf.load(args.model, with_metadata=True, storage_options=storage_options(args))
        if not callable(getattr(model, "predict", None)):  # a feature map or selector saved on its own
            raise ValueError(
                f"{args.model} holds a {type(model).__name__}, which transforms data but does not predict; "
                "predict and evaluate take a model saved by 'dxrf fit'"
            )
        data, X = _open(args.data, metadata, storage_options(args))
        _check_columns(data, metadata, args.data)
        if need_y and data.y is None:
            raise ValueError(f"{args.data} has no target array y to evaluate against")
        args._inputs = (model, metadata, data, X)
    return args._inputs


def _predict_precheck(args: argparse.Namespace) -> None:
    _check_predictions_out(args)
    _model_inputs(args, need_y=False)


def cmd_fit(args: argparse.Namespace) -> int:
    from dxrf.search.settings import learns_lengthscales

    data = _fit_inputs(args)
    classification = data.classes is not None
    metadata: dict = {"columns": list(data.columns), "classes": None if not classification else list(map(str, data.classes))}
    X = data.X
    model = build_model(args, classification)
    standardize = args.standardize if args.standardize is not None else not (  # a search learning lengthscales
        hasattr(model, "bandwidths") and learns_lengthscales(model.get_params(deep=False), *X.shape))  # scales itself
    if standardize:
        X = data.standardize(X)
        metadata.update(x_mean=np.asarray(data.x_mean, dtype=np.float64), x_std=np.asarray(data.x_std, dtype=np.float64))
    y = data.y
    if args.scale_y and not classification:
        lo, hi = data.attrs.get("y_min"), data.attrs.get("y_max")
        if lo is None or hi is None or hi <= lo:
            raise ValueError(f"{args.data} has no usable y_min/y_max to scale y into [-1, 1]")
        # the model keeps the map (y_scale_) and predicts in the data's units
        y = data.scale_y(y)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        model.fit(X, y)
    elapsed = time.perf_counter() - t0
    notes = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    for w in caught:
        if not issubclass(w.category, UserWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    model.save(args.out, metadata=metadata, overwrite=args.overwrite, storage_options=storage_options(args))
    if hasattr(model, "cv_results_"):
        print_search(model, X, elapsed, args.out, classification)
    else:
        print_fit(model, args, X, elapsed, _one(args, "select", "none"))
    for note in dict.fromkeys(notes):
        print(f"note:         {note}")
    return 0


def _old_y_scale(model: object, metadata: dict) -> np.ndarray | None:
    """``[y_min, y_max]`` of a model saved before models kept their target scaling (``y_scale_``)."""
    if getattr(model, "y_scale_", None) is None and metadata.get("y_min") is not None:
        return np.array([metadata["y_min"], metadata["y_max"]], dtype=np.float64)
    return None


def _cli_overwrite(exc: Exception, dest: str) -> Exception:
    from dxrf.io.files import DestinationExistsError

    if isinstance(exc, DestinationExistsError):
        return ValueError(f"{dest} exists; pass --overwrite to replace it")
    return exc


def cmd_predict(args: argparse.Namespace) -> int:
    import dxrf
    from dxrf.core.target_scale import unscale
    from dxrf.io.predictions import prediction_format, write_predictions

    from dxrf.core.options import get_options

    prediction_format(args.out)  # a bad suffix fails before any work
    model, metadata, data, X = _model_inputs(args, need_y=False)
    classes = metadata.get("classes")
    std = None
    if args.std:
        if classes is not None or getattr(model, "posterior_factor_", None) is None:
            what = "a classifier" if classes is not None else f"a {type(model).__name__} fitted without --posterior"
            raise ValueError(f"--std: {args.model} is {what}; a standard deviation needs a ridge regression "
                             "fitted with `dxrf fit ... --posterior` (store_posterior=True)")
        if _old_y_scale(model, metadata) is not None:
            raise ValueError(f"--std: {args.model} was saved before models kept their target scaling; fit it again")
        pred, std = model.predict(X, return_std=True)  # one map over the rows computes both
    else:
        pred = model.predict(X)
    attrs = {"model": resolve(args.model).url, "source": resolve(args.data).url}
    if classes is not None:
        pred = pred.astype(np.int32)
    else:
        pred = unscale(pred, _old_y_scale(model, metadata))
    try:
        n = write_predictions(pred, args.out, std=std, classes=classes, attrs=attrs, overwrite=args.overwrite,
                              progress=get_options().progress, storage_options=storage_options(args))
    except Exception as exc:
        raise _cli_overwrite(exc, args.out) from None
    print(f"wrote {n} predictions{' and standard deviations' if std is not None else ''} to {args.out}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    import dxrf

    from dxrf.core.options import get_options
    from dxrf.core.progress import compute

    model, metadata, data, X = _model_inputs(args, need_y=True)
    pred = model.predict(X)
    if metadata.get("classes") is not None:
        correct = (pred.astype(np.int64) == data.y.astype(np.int64)).sum()
        (n_correct,) = compute(dask.delayed(lambda c: (c,))(correct), progress=get_options().progress)
        n = X.shape[0]
        print(f"rows:     {n}")
        print(f"accuracy: {n_correct / n:.6f}")
        print(f"error:    {1 - n_correct / n:.6f}")
        return 0
    from dxrf.core.target_scale import unscale

    y = data.y.astype(np.float64)
    pred = unscale(pred, _old_y_scale(model, metadata)).astype(np.float64)
    if pred.ndim == 2:
        pred = pred[:, 0]
    err = y - pred
    sums = dask.delayed(lambda a, b, c, d: (a, b, c, d))((err**2).sum(), y.sum(), (y**2).sum(), da.fabs(err).sum())
    sse, sy, syy, sae = compute(sums, progress=get_options().progress)
    n = X.shape[0]
    var = syy / n - (sy / n) ** 2
    print(f"rows: {n}")
    print(f"MSE:  {sse / n:.6g}")
    print(f"RMSE: {np.sqrt(sse / n):.6g}")
    print(f"MAE:  {sae / n:.6g}")
    print(f"R2:   {1 - (sse / n) / var if var > 0 else float('nan'):.6f}")
    return 0


def add_model_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser, client_runner) -> None:
    """Register fit / predict / evaluate; ``client_runner(fn)`` runs fn inside a cluster client."""
    p = sub.add_parser("fit", help="fit a model on a dxrf zarr group and save it", parents=[common])
    p.add_argument("data", help="training data (a zarr group from `dxrf ingest`)")
    p.add_argument("--features", choices=FEATURE_MAPS, default="rff", help="random feature map")
    p.add_argument("--kernel", choices=["gaussian", "laplacian", "cauchy"], default="gaussian",
                   help="kernel of the Fourier features")
    p.add_argument("--bandwidth", type=_bandwidths, default=None,
                   help="numbers or 'median', 'median*c', comma-separated (a search over several); "
                        "default: a search over median*0.25 ... median*4")
    p.add_argument("--sampling", choices=["iid", "orthogonal", "qmc", "structured"], default="iid",
                   help="how the Fourier frequencies are drawn")
    p.add_argument("--pieces", type=int, default=2, help="maxout pieces")
    p.add_argument("--select", type=_select_list, default=None,
                   help=f"feature selections, comma-separated: {', '.join(SELECTIONS)} (default none)")
    p.add_argument("--n-components", type=_int_list, default=None,
                   help="M, the numbers of features (default 200; a search grows M from 250 in stages: "
                        "see --max-components, --time-budget)")
    p.add_argument("--max-components", type=positive_int, default=8000,
                   help="a search without --n-components grows M up to this (default 8000)")
    p.add_argument("--time-budget", type=seconds, default=300.0,
                   help="seconds: a search without --n-components starts no stage predicted to end later "
                        "(default 300; 0: no limit)")
    p.add_argument("--n-candidates", type=int, default=None, help="M0 (default 10 M with --select)")
    p.add_argument("--lam", type=_float_list, default=None, help="ELSS leverage penalties (default 1e-3)")
    p.add_argument("--method", choices=["sample", "top"], default=None, help="draw of elss and lkrf (default sample)")
    p.add_argument("--rho", type=_float_list, default=None, help="LKRF chi-square radii (default 1)")
    p.add_argument("--model", choices=MODELS, default="ridge", help="learner")
    p.add_argument("--alpha", type=float, default=None, help="one ridge penalty (default 1e-3)")
    p.add_argument("--alphas", type=_float_list, default=None, help="comma-separated penalty grid (ridge)")
    p.add_argument("--solver", choices=["auto", "gram", "pcg"], default="auto",
                   help="ridge with --features nystroem, and a Nystrom search (the default fit): one pass of M x M "
                        "statistics (gram), preconditioned CG over passes (pcg; a search needs a hold-out --cv "
                        "fraction), or the cheaper by the cost estimate (auto)")
    p.add_argument("--cv", type=_cv, default=None,
                   help="search with k folds (an integer) or a hold-out fraction, all from one pass (default 5)")
    p.add_argument("--validation", type=float, default=None,
                   help="validation fraction (default: none for a plain fit, 0.2 with --alphas or sgd)")
    p.add_argument("--standardize", action=argparse.BooleanOptionalAction, default=None,
                   help="standardise inputs with the stored column statistics (kept by the model); default: yes, "
                        "unless the search learns the lengthscales")
    p.add_argument("--scale-y", action="store_true",
                   help="fit on a numeric y scaled into [-1, 1] (the model keeps the map: predictions are in y's units)")
    p.add_argument("--dtype", choices=["float32", "float64"], default=None,
                   help="dtype of the features (default: float32; a default search: float64 for Nystroem features)")
    p.add_argument("--posterior", action="store_true",
                   help="keep the ridge posterior (M x M float64 in the model) so `dxrf predict --std` can give the "
                        "predictive standard deviation")
    p.add_argument("--seed", type=int, default=0, help="random seed of the features and splits")
    p.add_argument("--out", required=True, type=lasting_destination, help="model path (a zarr group)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing model at --out")
    p.set_defaults(func=client_runner(cmd_fit), precheck=_fit_inputs)

    p = sub.add_parser("predict", help="predict with a saved model into a .zarr, .csv or .parquet file, chunk by chunk",
                       parents=[common])
    p.add_argument("model", help="a model saved by `dxrf fit`")
    p.add_argument("data", help="a dxrf zarr group with the model's columns")
    p.add_argument("--out", required=True, type=lasting_destination,
                   help="predictions: P.zarr (array y_pred), P.csv or P.parquet (column 'prediction': the value, "
                        "or the class label)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    p.add_argument("--std", action="store_true",
                   help="also the posterior predictive standard deviation (a model fitted with --posterior): array "
                        "y_std beside y_pred, or column 'std' (std_0, std_1, ...) beside the predictions")
    p.set_defaults(func=client_runner(cmd_predict), precheck=_predict_precheck)

    p = sub.add_parser("evaluate", help="print a saved model's metrics on a dxrf zarr group", parents=[common])
    p.add_argument("model", help="a model saved by `dxrf fit`")
    p.add_argument("data", help="a dxrf zarr group with the model's columns and a target")
    p.set_defaults(func=client_runner(cmd_evaluate), precheck=lambda a: _model_inputs(a, need_y=True))
