"""The messages between the per-class solvers and the passes that serve them.

Each solver is a generator yielding :class:`_Request` and receiving
:class:`_Reply`, returning an :class:`_Outcome`. A leaf module of the package:
the objective reads replies and the batching builds them, without importing
each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator

import numpy as np


@dataclasses.dataclass
class _Request:
    """What one solver needs from the next pass, at ``point`` = [theta; beta] (M + 1,).

    For the multinomial problem the point, ``direction`` and ``vector`` are
    (M + 1, K) matrices flattened row by row, and so are the replies'
    ``grad`` and ``hv``.
    """

    point: np.ndarray
    grad: bool = True
    hessian: bool = False
    direction: np.ndarray | None = None  # line-search losses at point - (1 - s) direction
    vector: np.ndarray | None = None  # Hessian-vector product at point


@dataclasses.dataclass
class _Reply:
    loss: float | None = None
    grad: np.ndarray | None = None
    hessian: np.ndarray | None = None
    line: np.ndarray | None = None
    hv: np.ndarray | None = None


@dataclasses.dataclass
class _Outcome:
    point: np.ndarray
    loss: float
    n_iter: int
    converged: bool
    message: str


_Solver = Generator[_Request, _Reply, _Outcome]
