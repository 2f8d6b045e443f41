"""What the workers of a test cluster still hold: a fit must leave none of its blocks behind."""

from __future__ import annotations

import time

from distributed import Client


def held_keys(client: Client) -> dict:
    """The keys each worker holds in memory."""
    return client.run(lambda dask_worker: [str(k) for k in dask_worker.data.keys()])


def wait_until_empty(client: Client, timeout: float = 20.0) -> dict:
    """The workers' keys once they hold none (releases reach them asynchronously), or what they still hold."""
    deadline = time.monotonic() + timeout
    held = held_keys(client)
    while any(held.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
        held = held_keys(client)
    return held


def empty(client: Client) -> dict:
    """What :func:`wait_until_empty` returns when every worker is empty."""
    return {worker: [] for worker in held_keys(client)}
