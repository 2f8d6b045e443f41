"""The row sample of Newton's Hessians, defined on global row indices so that every chunking sums the same rows."""

from __future__ import annotations

import numbers

_HESS_BLOCK = 1024  # rows per block of the Hessian row sample (whole blocks are sampled)
#: ``hessian_rows="auto"``: Hessians from about this many rows per parameter (at least), see fit_logistic
HESSIAN_ROWS_PER_PARAMETER = 100


def _hessian_runs(start: int, stop: int, period: int) -> list[tuple[int, int]]:
    """The rows of ``[start, stop)`` (global indices) that enter a sampled Hessian.

    Rows are taken in blocks of :data:`_HESS_BLOCK`: block ``k`` (rows
    ``k B .. (k+1) B - 1``) is in when ``k % period == 0``. The sample depends
    on the global row index only, so every chunking of X sums the same rows.
    """
    if period == 1:
        return [(start, stop)]
    B = _HESS_BLOCK
    runs = []
    for k in range(start // B, (stop - 1) // B + 1):
        if k % period == 0:
            a, b = max(start, k * B), min(stop, (k + 1) * B)
            if a < b:
                runs.append((a, b))
    return runs


def _hessian_period(hessian_rows: object, n: int, m: int, d: int) -> int:
    """The period ``p`` of the Hessian row sample (1: every row) for ``hessian_rows``."""
    if hessian_rows is None:
        return 1
    auto = isinstance(hessian_rows, str) and hessian_rows == "auto"
    count = isinstance(hessian_rows, numbers.Integral) and not isinstance(hessian_rows, bool) and hessian_rows > 0
    if not (auto or count):
        raise ValueError(f'hessian_rows must be "auto", a positive integer or None, got {hessian_rows!r}')
    if auto and m + 1 < 2 * (d + 1):
        # a row's Hessian term ((M+1)^2 flops) is then cheaper than its features
        # (2 (d+1) M): sampling would save little and cost passes
        return 1
    wanted = HESSIAN_ROWS_PER_PARAMETER * (m + 1) if auto else int(hessian_rows)
    # whole blocks are sampled: below two blocks per period the sample is not a saving
    period = n // wanted
    return period if period >= 2 and n >= 2 * _HESS_BLOCK * period else 1
