"""Memory budgets: refuse a request whose estimated memory cannot fit, before allocating it.

A tiny input can ask for a huge allocation (a LibSVM feature index of two
billion, a text column with many levels, ``n_candidates=300000``); allocating
it ends in a bare ``MemoryError``, a killed worker or a machine brought down.
Each such place estimates its bytes first and calls :func:`check_allocation`
(or :func:`check_pass` for a pass over the data), which raises a
``ValueError`` naming the cause, the estimate, the limit and what to lower.

The limit of the client process is what this machine can still give it: the
available physical memory (``MemAvailable`` of ``/proc/meminfo``, else the
physical memory), the room left under a cgroup's ``memory.max`` and under the
process's address-space limit (``RLIMIT_AS``). A worker's limit is the
smallest ``memory_limit`` of the active distributed client's workers.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from typing import NamedTuple

__all__ = [
    "Limit",
    "memory_limit",
    "worker_memory_limit",
    "check_allocation",
    "check_pass",
    "checked_pass",
    "check_statistics",
    "check_task",
    "local_threads",
    "ingest_chunk_bytes",
    "format_bytes",
]


class Limit(NamedTuple):
    """A memory limit in bytes and the words that say where it comes from."""

    nbytes: int
    source: str


def format_bytes(n: float) -> str:
    """``n`` bytes in GiB (or MiB below one GiB), for messages."""
    if n >= 2**30:
        return f"{n / 2**30:,.2f} GiB"
    return f"{n / 2**20:,.1f} MiB"


def _proc_kib(path: str, key: str) -> int | None:
    """Bytes of a ``KEY:  N kB`` line of a /proc file, None where there is none."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _meminfo(key: str) -> int | None:
    return _proc_kib("/proc/meminfo", key)


def _status(key: str) -> int | None:
    return _proc_kib("/proc/self/status", key)


def _cgroup_room() -> int | None:
    """Bytes left under this process's cgroup v2 ``memory.max``, if one is set."""
    try:
        with open("/proc/self/cgroup") as f:
            rel = next((ln.split(":", 2)[2].strip() for ln in f if ln.startswith("0::")), None)
        if rel is None:
            return None
        base = os.path.join("/sys/fs/cgroup", rel.lstrip("/"))
        with open(os.path.join(base, "memory.max")) as f:
            text = f.read().strip()
        if text == "max":
            return None
        with open(os.path.join(base, "memory.current")) as f:
            current = int(f.read().strip())
        return max(0, int(text) - current)
    except (OSError, ValueError, StopIteration):
        return None


def _address_space_room() -> int | None:
    """Bytes of address space left under ``RLIMIT_AS``, if the process has one."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None
    used = _status("VmSize") or 0
    return max(0, soft - used)


def memory_limit() -> Limit:
    """What this process can still allocate: the smallest of the machine's limits.

    Returns
    -------
    Limit
        The available physical memory (``MemAvailable``, else all physical
        memory), lowered by a cgroup limit and by ``RLIMIT_AS`` where set.
    """
    avail = _meminfo("MemAvailable")
    limits: list[Limit] = []
    if avail is not None:
        limits.append(Limit(avail, "this machine's available memory"))
    else:
        try:
            phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            limits.append(Limit(int(phys), "this machine's physical memory"))
        except (ValueError, OSError, AttributeError):  # pragma: no cover - sysconf names missing
            pass
    room = _cgroup_room()
    if room is not None:
        limits.append(Limit(room, "the memory left under this container's limit (cgroup memory.max)"))
    room = _address_space_room()
    if room is not None:
        limits.append(Limit(room, "the address space left under this process's limit (RLIMIT_AS)"))
    if not limits:  # pragma: no cover - no way to tell: nothing is refused
        return Limit(2**63 - 1, "unknown")
    return min(limits, key=lambda lim: lim.nbytes)


def worker_memory_limit() -> Limit | None:
    """The smallest worker memory limit of the active distributed client, or None.

    None when no client is active or no worker has a memory limit.
    """
    from dxrf.core.progress import active_client

    client = active_client()
    if client is None:
        return None
    try:
        workers = client.scheduler_info().get("workers", {}).values()
    except Exception:  # a client that cannot answer: the pass will say why
        return None
    limits = [int(w.get("memory_limit") or 0) for w in workers]
    limits = [m for m in limits if m > 0]
    if not limits:
        return None
    return Limit(min(limits), "the smallest worker's memory limit")


def _refuse(nbytes: int, what: str, advice: str, limit: Limit, amount: str = "") -> None:
    if nbytes > limit.nbytes:
        amount = amount or f"{format_bytes(nbytes)} of memory"
        raise ValueError(
            f"{what} needs about {amount} but {limit.source} is {format_bytes(limit.nbytes)}: {advice}"
        )


def check_allocation(nbytes: int, what: str, advice: str, *, limit: Limit | None = None) -> None:
    """Raise ``ValueError`` when ``nbytes`` cannot fit in this process.

    Parameters
    ----------
    nbytes : int
        Estimated bytes of the request.
    what : str
        The parameter or input that causes it, e.g. ``"n_candidates=300000 (a
        300000 x 300000 Gram)"``; the message reads ``"{what} needs about ..."``.
    advice : str
        What to lower, e.g. ``"use fewer candidates (n_candidates)"``.
    limit : Limit, optional
        Default: :func:`memory_limit`.
    """
    _refuse(int(nbytes), what, advice, memory_limit() if limit is None else limit)


#: True while a pass runs that its caller already checked (see :func:`checked_pass`)
_PASS_CHECKED: ContextVar[bool] = ContextVar("dxrf_pass_checked", default=False)


@contextlib.contextmanager
def checked_pass() -> Iterator[None]:
    """Within this block the pass about to run is already checked: :func:`check_pass` is not repeated.

    A learner refuses a pass with :func:`check_statistics` before it draws the
    features (the message names its parameter), and :func:`dxrf.accumulate`
    checks the pass it runs; the engine's run of that pass would check its
    partials a third time. Each caller that checked wraps the next level in
    this block, so each pass is checked once, by the caller that knows most.
    """
    token = _PASS_CHECKED.set(True)
    try:
        yield
    finally:
        _PASS_CHECKED.reset(token)


def check_pass(partial_bytes: int, client_bytes: int, what: str, advice: str, *, concurrency: int = 1) -> None:
    """Refuse a pass whose partial results or client-side result cannot fit.

    A worker holds at least two partials at once (a lane's running sums and
    the partial it merges). With a distributed client, two partials are
    checked against the smallest worker's memory limit and ``client_bytes``
    (what the client receives and computes with) against this machine.
    Without one, the pass runs in this process: ``concurrency`` threads each
    hold a partial, plus the one being merged, plus ``client_bytes``.

    Parameters
    ----------
    partial_bytes : int
        Bytes of one partial result.
    client_bytes : int
        Bytes the client holds for the result and the algebra after it.
    what, advice : str
        As for :func:`check_allocation`.
    concurrency : int, default 1
        Threads of an in-process pass.
    """
    if _PASS_CHECKED.get():
        return  # the caller checked this pass already
    partial_bytes = max(0, int(partial_bytes))
    worker = worker_memory_limit()
    from dxrf.core.progress import active_client

    if active_client() is not None:
        if worker is not None:
            amount = f"{format_bytes(2 * partial_bytes)} per worker (two partial results of {format_bytes(partial_bytes)})"
            _refuse(2 * partial_bytes, what, advice, worker, amount)
        check_allocation(client_bytes, what, advice)
    else:
        check_allocation((max(1, concurrency) + 1) * partial_bytes + int(client_bytes), what, advice)


def local_threads(X: object = None) -> int:
    """Threads an in-process pass over ``X`` runs at once: the cores, at most one per row chunk."""
    threads = os.cpu_count() or 1
    blocks = getattr(X, "numblocks", None)
    if blocks:
        return max(1, min(threads, int(blocks[0])))
    shape = getattr(X, "shape", None)
    if shape:
        return max(1, min(threads, int(shape[0])))
    return threads


def statistics_bytes(m0: int, maps: int = 1, groups: int = 1, algebra: int = 4) -> tuple[int, int]:
    """Bytes of one statistics partial and of the client's share, for ``maps`` maps of ``m0`` features.

    A partial holds compensated (hi and lo) float64 sums of the packed Gram,
    about ``m0 (m0 + 64) / 2`` numbers, per map and group of rows; the client
    receives one dense ``m0 x m0`` float64 Gram per map and group, and its
    algebra (differences of folds, eigendecompositions) needs ``algebra``
    more.
    """
    m0, maps, groups = int(m0), int(maps), int(groups)
    partial = maps * groups * 2 * 8 * (m0 * (m0 + 64) // 2)
    client = 8 * m0 * m0 * (maps * groups + algebra)
    return partial, client


def check_statistics(
    m0: int, param: str, advice: str, *, maps: int = 1, groups: int = 1, algebra: int = 4, X: object = None
) -> None:
    """Refuse a statistics pass of ``maps`` maps of ``m0`` features over ``groups`` row groups that cannot fit.

    Called before the features are drawn, so the message names the
    parameter (``param``, e.g. ``"n_candidates"``) rather than a failed
    allocation. ``X`` (the data) bounds the threads of an in-process pass.
    """
    partial, client = statistics_bytes(m0, maps, groups, algebra)
    shape = f"{maps} feature map{'s' if maps != 1 else ''} x {groups} row group{'s' if groups != 1 else ''}"
    what = f"{param}={int(m0)} ({shape} of {int(m0)} x {int(m0)} float64 statistics)"
    check_pass(partial, client, what, advice, concurrency=local_threads(X))


def ingest_chunk_bytes(columns: int, chunk_rows: int, itemsize: int = 4) -> int:
    """Bytes an ingest holds for ``columns`` columns written in chunks of ``chunk_rows`` rows.

    A block of the source (``itemsize`` bytes a value), its float32
    encoding, its finiteness mask, the writer's buffered chunk and zarr's
    encoded copy of it, each ``chunk_rows x columns``; plus the columns'
    names and statistics.
    """
    return int(columns) * (int(chunk_rows) * (int(itemsize) + 4 * 4 + 1) + 128)


def check_task(nbytes: int, what: str, advice: str) -> None:
    """Refuse one task of ``nbytes``: against the smallest worker with a distributed client, else this machine."""
    worker = worker_memory_limit()
    check_allocation(nbytes, what, advice, limit=worker)
