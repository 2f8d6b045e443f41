"""Which estimators scikit-learn's weights-versus-repeated-rows check cannot hold for, and why.

``check_sample_weight_equivalence_on_dense_data`` compares a fit with integer
weights to a fit on the rows repeated, at ``rtol=1e-7``. It holds for every
estimator whose fit sees the rows only through weighted sums: the statistics
and logistic passes weigh every term (an integer weight is the row repeated,
up to float64 rounding: a small pass accumulates float32 features' products
in float64, DESIGN.md "Precision of the pass"), and a ``"median"`` bandwidth
weighs each pair of rows by the product of their weights. It cannot hold
where something looks at row indices or at the rows' order.
"""

from __future__ import annotations

CHECK = "check_sample_weight_equivalence_on_dense_data"
STOCHASTIC = ("SGD visits the rows in a shuffled order: repeated rows are more, different steps, equal to "
              "weights only in expectation (tests/core/test_weights.py checks the kernels and a tolerance band)")
LANDMARKS = ("Nystroem features (and the Nystroem search) draw their landmarks uniformly over row indices, "
             "unweighted: repeated rows change which rows become landmarks; NystroemFeatures takes sample_weight "
             "for bandwidth='ard' only")
VALIDATION = ("validation rows are chosen by a hash of the row index (the default 0.2 with alphas): "
              "repeating rows changes which rows validate the penalty")


def _hashed_validation(est: object) -> bool:
    params = est.get_params(deep=False)
    if "validation" not in params:
        return False
    validation = params["validation"]
    return isinstance(validation, float) or (validation is None and params.get("alphas") is not None)


def weight_xfails(est: object) -> dict:
    """``{check: reason}`` for an estimator the equivalence check cannot hold for, else ``{}``."""
    name = type(est).__name__
    if "SGD" in name:
        return {CHECK: STOCHASTIC}
    if name.endswith("CV"):
        # the check gives cv=list(LeaveOneGroupOut().split(...)): explicit folds, not hashed row indices
        return {CHECK: LANDMARKS} if est.get_params(deep=False).get("features") == "nystroem" else {}
    return {CHECK: VALIDATION} if _hashed_validation(est) else {}
