"""The grid of a model search: bandwidths, selections, numbers of features and penalties.

Every axis is a list. Bandwidths are numbers, multiples of the median
heuristic (``"median"``, ``"median*0.5"``), multiples of lengthscales learned
by GP evidence (``"ard*0.7"``, ``"evidence"``) or vectors of per-column
lengthscales (one candidate each, labelled compactly); a selection variant is a
selection method with its own penalty (``lam`` for ELSS, ``rho`` for LKRF);
numbers of features are prefixes of one candidate set per bandwidth; ridge
penalties ``alpha`` form a path solved from one eigendecomposition.
"""

from __future__ import annotations

import dataclasses
import numbers
import re

import numpy as np

from dxrf.core.validation import ParameterTypeError
from dxrf.features.maps import check_lengthscales, format_bandwidth, is_lengthscales

__all__ = ["SELECTIONS", "Variant", "SearchGrid", "BandwidthSpec", "check_grid", "parse_bandwidth"]

# selection name -> (selector criterion, draw method); "none" keeps the first M candidates
SELECTIONS = {
    "none": (None, None),
    "elss-sample": ("leverage", "sample"),
    "elss-top": ("leverage", "top"),
    "eerf": ("energy", "top"),
    "lkrf": ("alignment", "sample"),
    "lkrf-top": ("alignment", "top"),
}

_MEDIAN = re.compile(r"^\s*(?:median\s*(?:\*\s*(?P<a>[^*\s]+))?|(?P<b>[^*\s]+)\s*\*\s*median)\s*$")
_ARD = re.compile(r"^\s*(?:ard\s*(?:\*\s*(?P<a>[^*\s]+))?|(?P<b>[^*\s]+)\s*\*\s*ard)\s*$")
_EVIDENCE = re.compile(r"^\s*(?:evidence\s*(?:\*\s*(?P<a>[^*\s]+))?|(?P<b>[^*\s]+)\s*\*\s*evidence)\s*$")


@dataclasses.dataclass(frozen=True)
class BandwidthSpec:
    """A bandwidth as given: a number, ``factor`` times the median heuristic, or lengthscales.

    Lengthscales are held as a tuple of floats (``value``); their ``text``
    (the ``bandwidth`` of the search's ``params``) is a compact label.
    """

    value: float | tuple[float, ...] | None
    factor: float | None
    text: object
    # what ``factor`` multiplies: the median heuristic ("median"), the per-column lengthscales of
    # maximum GP evidence ("ard"), or the one lengthscale of maximum evidence in the units it chose ("evidence")
    base: str = "median"

    @property
    def is_vector(self) -> bool:
        return isinstance(self.value, tuple)

    def resolve(self, median: float | None, lengthscales: np.ndarray | None = None,
                isotropic: np.ndarray | None = None) -> float | np.ndarray:
        """The value: ``factor`` times the median, the ARD lengthscales or the isotropic evidence's lengthscales."""
        if self.is_vector:
            return np.array(self.value, dtype=np.float64)
        if self.factor is None:
            return self.value
        if self.base == "ard":
            return self.factor * np.asarray(lengthscales, dtype=np.float64)
        if self.base == "evidence":
            return self.factor * np.asarray(isotropic, dtype=np.float64)
        return self.factor * float(median)


def _factor(text: str | None, bad: ValueError) -> float:
    """The ``c`` of ``"median*c"`` or ``"ard*c"`` (1 without one): a positive finite number, else ``bad``."""
    try:
        factor = 1.0 if text is None else float(text)
    except ValueError:
        raise bad from None
    if not (np.isfinite(factor) and factor > 0):
        raise bad
    return factor


def parse_bandwidth(spec: object) -> BandwidthSpec:
    """A number, ``"median"``, ``"median*c"`` or ``"c*median"`` (``c > 0``), or lengthscales; else ``ValueError``."""
    bad = ValueError(f"bandwidths must hold positive numbers, 'median', 'median*c', 'ard', 'ard*c', 'evidence' or "
                     f"'evidence*c' (c > 0), or lengthscales, got {spec!r}")
    if is_lengthscales(spec):
        ls = check_lengthscales(spec)
        return BandwidthSpec(tuple(ls.tolist()), None, format_bandwidth(ls))
    if isinstance(spec, str):
        for base, pattern in (("ard", _ARD), ("evidence", _EVIDENCE), ("median", _MEDIAN)):
            m = pattern.match(spec)
            if m is not None:
                return BandwidthSpec(None, _factor(m.group("a") or m.group("b"), bad), spec, base=base)
        try:
            return parse_bandwidth(float(spec))
        except ValueError:
            raise bad from None
    if isinstance(spec, bool) or not isinstance(spec, numbers.Real):
        raise ParameterTypeError(f"bandwidths must hold positive numbers or 'median', 'median*c', got {spec!r}")
    if not (np.isfinite(spec) and spec > 0):
        raise bad
    return BandwidthSpec(float(spec), None, float(spec))


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way of choosing features from the candidates: a selection and its penalty."""

    selection: str
    lam: float | None = None
    rho: float | None = None

    @property
    def criterion(self) -> str | None:
        return SELECTIONS[self.selection][0]

    @property
    def method(self) -> str | None:
        return SELECTIONS[self.selection][1]


@dataclasses.dataclass(frozen=True)
class SearchGrid:
    """A validated grid (see :func:`check_grid`)."""

    bandwidths: tuple[BandwidthSpec, ...]
    n_components: np.ndarray
    variants: tuple[Variant, ...]
    alphas: np.ndarray
    n_candidates: int
    candidate_ratio: int | None = None

    @property
    def needs_median(self) -> bool:
        return any(b.factor is not None and b.base == "median" for b in self.bandwidths)

    @property
    def needs_ard(self) -> bool:
        return any(b.factor is not None and b.base == "ard" for b in self.bandwidths)

    @property
    def needs_evidence(self) -> bool:
        return any(b.factor is not None and b.base == "evidence" for b in self.bandwidths)

    @property
    def supervised(self) -> bool:
        return any(v.criterion in ("energy", "alignment") for v in self.variants)

    def pools(self) -> list[tuple[int, list[int]]]:
        """``(p, positions of the M it serves)``: each M selects among the first ``p`` candidates.

        One pool of all ``M0`` candidates for every M (each M a prefix of the
        largest M's selection), or with ``candidate_ratio`` one pool of the
        first ``ratio * M`` candidates per M (a selection of its own).
        """
        if self.candidate_ratio is None:
            return [(self.n_candidates, list(range(self.n_components.size)))]
        return [(self.candidate_ratio * int(m), [i]) for i, m in enumerate(self.n_components)]

    @property
    def n_configurations(self) -> int:
        return len(self.bandwidths) * len(self.variants) * self.n_components.size * self.alphas.size


def _as_list(values: object, name: str) -> list:
    if values is None:
        raise ValueError(f"{name} must be a non-empty list, got None")
    if isinstance(values, (str, numbers.Number)):
        values = [values]
    try:
        out = list(np.asarray(values, dtype=object).reshape(-1)) if not isinstance(values, (list, tuple)) else list(values)
    except TypeError:
        raise ParameterTypeError(f"{name} must be a list, got {values!r}") from None
    if not out:
        raise ValueError(f"{name} must be a non-empty list, got an empty one")
    return out


def _positive_floats(values: object, name: str, *, allow_zero: bool = False) -> np.ndarray:
    items = _as_list(values, name)
    if any(isinstance(v, (bool, str)) or not isinstance(v, numbers.Real) for v in items):
        raise ParameterTypeError(f"{name} must hold numbers, got {values!r}")
    a = np.asarray(items, dtype=np.float64)
    ok = np.isfinite(a) & ((a >= 0) if allow_zero else (a > 0))
    if not ok.all():
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must hold {kind} finite numbers, got {a[~ok][0]!r}")
    return np.unique(a)


def check_grid(
    bandwidths: object,
    n_components: object,
    selections: object,
    lams: object,
    rhos: object,
    alphas: object,
    n_candidates: object,
    candidate_ratio: object = None,
) -> SearchGrid:
    """Validate every axis of a search; ``ValueError`` or ``TypeError`` naming the parameter.

    ``n_candidates`` (M0) defaults to 10 times the largest M when a selection
    other than ``"none"`` is searched, else to the largest M. Every M must
    be at most M0. Numeric axes are sorted and made unique; bandwidths and
    selections keep their order (their duplicates are dropped).
    ``candidate_ratio`` (an integer r >= 1, or None) makes each M choose among
    the first ``r * M`` candidates; M0 then defaults to ``r`` times the
    largest M and must hold ``r * M`` for every M.
    """
    specs: list[BandwidthSpec] = []
    for b in _as_list(bandwidths, "bandwidths"):
        s = parse_bandwidth(b)
        if all((s.value, s.factor, s.base) != (t.value, t.factor, t.base) for t in specs):
            if any(s.text == t.text for t in specs):  # lengthscales whose compact labels coincide
                s = dataclasses.replace(s, text=f"{s.text} #{len(specs) + 1}")
            specs.append(s)
    items = _as_list(n_components, "n_components")
    if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in items):
        raise ParameterTypeError(f"n_components must hold positive integers, got {n_components!r}")
    ms = np.unique(np.asarray(items, dtype=np.int64))
    if ms[0] < 1:
        raise ValueError(f"n_components must hold positive integers, got {int(ms[0])}")
    names = []
    for s in _as_list(selections, "selections"):
        if s not in SELECTIONS:
            raise ValueError(f"selections: unknown selection {s!r}; choose from {tuple(SELECTIONS)}")
        if s not in names:
            names.append(s)
    lam_grid = _positive_floats(lams, "lams")
    rho_grid = _positive_floats(rhos, "rhos")
    alpha_grid = _positive_floats(alphas, "alphas", allow_zero=True)
    ratio = None
    if candidate_ratio is not None:
        if isinstance(candidate_ratio, bool) or not isinstance(candidate_ratio, numbers.Integral):
            raise ParameterTypeError(f"candidate_ratio must be a positive integer or None, got {candidate_ratio!r}")
        ratio = int(candidate_ratio)
        if ratio < 1:
            raise ValueError(f"candidate_ratio must be a positive integer or None, got {ratio}")
    if n_candidates is None:
        m0 = int(ms[-1]) * (ratio if ratio is not None else 10 if any(s != "none" for s in names) else 1)
    else:
        if isinstance(n_candidates, bool) or not isinstance(n_candidates, numbers.Integral):
            raise ParameterTypeError(f"n_candidates must be a positive integer or None, got {n_candidates!r}")
        m0 = int(n_candidates)
        if m0 < 1:
            raise ValueError(f"n_candidates must be a positive integer or None, got {m0}")
    if ms[-1] > m0:
        raise ValueError(f"n_components holds M={int(ms[-1])}, larger than n_candidates={m0} (M0)")
    if ratio is not None and ratio * int(ms[-1]) > m0:
        raise ValueError(
            f"candidate_ratio={ratio} needs {ratio * int(ms[-1])} candidates for M={int(ms[-1])}, "
            f"more than n_candidates={m0} (M0)"
        )
    variants = []
    for s in names:
        criterion = SELECTIONS[s][0]
        if criterion == "leverage":
            variants += [Variant(s, lam=float(v)) for v in lam_grid]
        elif criterion == "alignment":
            variants += [Variant(s, rho=float(v)) for v in rho_grid]
        else:
            variants.append(Variant(s))
    return SearchGrid(tuple(specs), ms, tuple(variants), alpha_grid, m0, ratio)
