"""Requests of the per-class solvers, batched so that one pass serves every unfinished class.

Each class's solver is a generator yielding :class:`_Request` and receiving
:class:`_Reply` (:mod:`.messages`); :func:`_drive` advances them in lockstep and
:func:`_batch_pass` turns one round of requests into one pass.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dxrf.core.blas import blas_limit
from dxrf.solvers.logistic.messages import _Outcome, _Reply, _Request, _Solver
from dxrf.solvers.logistic.passes import _PassRunner
from dxrf.solvers.logistic.sums import _make_spec


def _batch_pass(runner: _PassRunner, requests: dict[int, _Request]) -> dict[int, _Reply]:
    """Serve the requests of several solvers with ONE pass.

    Solver k owns the ``runner.width`` label columns from ``k * width``: its
    point is their (M + 1, width) coefficient matrix (width 1: one binary problem).
    """
    ks = sorted(requests)
    reqs = [requests[k] for k in ks]
    c = runner.width
    m1 = runner.kernel.n_components + 1

    def stack(vectors: list[np.ndarray]) -> np.ndarray:
        return np.column_stack([v.reshape(m1, c) for v in vectors])

    def pick(cond: Callable[[_Request], bool]) -> np.ndarray:
        # the solvers (positions in reqs) that need it
        return np.array([j for j, r in enumerate(reqs) if cond(r)], dtype=np.intp)

    def columns(js: np.ndarray) -> np.ndarray:  # their batch (or label) columns
        return (js[:, None] * c + np.arange(c)).ravel()

    grad, hess = pick(lambda r: r.grad), pick(lambda r: r.hessian)
    line, hv = pick(lambda r: r.direction is not None), pick(lambda r: r.vector is not None)
    spec = _make_spec(
        runner.kernel,
        columns(np.array(ks, dtype=np.intp)),
        stack([r.point for r in reqs]),
        columns(grad),
        hess,  # binary problems only
        line=columns(line),
        directions=stack([reqs[j].direction for j in line]) if line.size else None,
        hv=columns(hv),
        vectors=stack([reqs[j].vector for j in hv]) if hv.size else None,
        precise=runner.precise,
        wide=runner.wide,
        hess_period=runner.hess_period,
        multinomial=runner.multinomial,
    )
    out = runner(spec)
    replies = {k: _Reply() for k in ks}
    # the i-th solver of a kind owns columns i*c .. (i+1)*c - 1 of that kind's sums;
    # losses are split by column (by class for the softmax), so they add up
    for i, j in enumerate(grad):
        replies[ks[j]].loss = float(out.loss[i * c : (i + 1) * c].sum())
        replies[ks[j]].grad = out.grad[:, i * c : (i + 1) * c].ravel()
    for i, j in enumerate(hess):
        replies[ks[j]].hessian = out.hess[i]
    for i, j in enumerate(line):
        replies[ks[j]].line = out.line[:, i * c : (i + 1) * c].sum(axis=1)
    for i, j in enumerate(hv):
        replies[ks[j]].hv = out.hv[:, i * c : (i + 1) * c].ravel()
    return replies


def _drive(solvers: dict[int, _Solver], runner: _PassRunner) -> dict[int, _Outcome]:
    """Advance the per-class solvers in lockstep: every pass serves all unfinished classes."""
    outcomes: dict[int, _Outcome] = {}
    pending: dict[int, _Request] = {}

    def advance(k: int, reply: _Reply | None) -> None:
        try:
            # the solver's (M+1)-square algebra on one BLAS thread: bit-reproducible whatever
            # the caller's threads, and no BLAS threads left spinning on the cores that the
            # workers of a local cluster need for the next pass
            with blas_limit(1):
                pending[k] = next(solvers[k]) if reply is None else solvers[k].send(reply)
        except StopIteration as stop:
            outcomes[k] = stop.value
            pending.pop(k, None)

    try:
        for k in solvers:
            advance(k, None)
        while pending:
            for k, reply in _batch_pass(runner, pending).items():
                advance(k, reply)
    finally:
        for s in solvers.values():
            s.close()
    return outcomes
