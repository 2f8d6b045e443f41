"""Experiments and benchmarks, one module each, run by ``dxrf reproduce`` / ``dxrf bench``.

Each module defines ``DESCRIPTION``, ``add_arguments(parser)`` and
``run(args) -> dict``; the command line discovers them by name.
"""
