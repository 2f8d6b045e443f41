"""The "lbfgs" solver: scipy's L-BFGS-B in a helper thread, bridged to a solver generator."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator

import numpy as np
import scipy.optimize

from dxrf.solvers.logistic.messages import _Outcome, _Reply, _Request, _Solver
from dxrf.solvers.logistic.objective import _Objective


class _Stop(BaseException):
    """Unwinds a solver thread whose generator was closed."""


def _threaded(run: Callable[[Callable[[_Request], _Reply]], object]) -> Generator[_Request, _Reply, object]:
    """Turn a blocking optimiser (scipy's) into a solver generator.

    ``run(call)`` runs in a thread; each ``call(request)`` hands the request to
    the generator, which yields it to the driver and sends the reply back. Only
    one side runs at a time, so several classes share passes without races.
    """
    to_main: queue.SimpleQueue = queue.SimpleQueue()
    to_thread: queue.SimpleQueue = queue.SimpleQueue()

    def call(request: _Request) -> _Reply:
        to_main.put(("request", request))
        reply = to_thread.get()
        if reply is None:
            raise _Stop
        return reply

    def target() -> None:
        try:
            to_main.put(("done", run(call)))
        except _Stop:
            to_main.put(("stopped", None))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            to_main.put(("error", exc))

    thread = threading.Thread(target=target, name="dxrf-logistic-solver", daemon=True)
    thread.start()
    try:
        while True:
            kind, payload = to_main.get()
            if kind == "done":
                return payload
            if kind == "error":
                raise payload
            if kind == "stopped":
                raise RuntimeError("solver thread stopped unexpectedly")
            to_thread.put((yield payload))
    finally:
        if thread.is_alive():
            to_thread.put(None)
            thread.join()


def _lbfgs(obj: _Objective, w: np.ndarray, tol: float, max_iter: int) -> _Solver:
    """scipy's L-BFGS-B, one pass per function-and-gradient evaluation."""
    d = obj.dim

    def point(x: np.ndarray) -> np.ndarray:
        p = np.zeros(obj.size)
        p[:d] = x
        return p

    def run(call: Callable[[_Request], _Reply]) -> scipy.optimize.OptimizeResult:
        def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
            p = point(x)
            reply = call(_Request(p))
            return obj.value(reply.loss, p), obj.gradient(reply.grad, p)[:d]

        options = {"maxiter": max_iter, "gtol": tol, "ftol": obj.ftol, "maxls": 50, "maxfun": max(15000, 2 * max_iter)}
        return scipy.optimize.minimize(fun, w[:d].copy(), jac=True, method="L-BFGS-B", options=options)

    res = yield from _threaded(run)
    return _Outcome(point(res.x), float(res.fun), int(res.nit), bool(res.success), str(res.message))
