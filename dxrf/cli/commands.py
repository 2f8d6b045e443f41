"""The ``dxrf`` command line.

Every command takes ``--scheduler ADDRESS`` (or ``$DASK_SCHEDULER_ADDRESS``) to
run on an existing Dask cluster; otherwise passes run on an embedded local
cluster. ``dxrf ingest`` starts one only for a CSV or Parquet file of at least
64 MiB once decompressed (smaller files, other formats and ``--scheduler none``
are ingested in this process). Errors print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from dxrf.cli.arguments import comma_items, lasting_destination, parse_storage_option, storage_options

__all__ = ["main"]

EXIT_USAGE = 2


class CommandError(Exception):
    """An error to report to the user in one line, without a traceback."""


class _HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default, where it has a meaningful one.

    Options whose default is None or False (flags, values chosen at run time)
    are left alone, as are help texts that already say their default.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if not text or "default" in text or not _meaningful_default(action):
            return text
        return f"{text} (default: %(default)s)"


def _meaningful_default(action: argparse.Action) -> bool:
    d = action.default
    return bool(action.option_strings) and not (d is None or d is False or d == argparse.SUPPRESS)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit status 2)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs) -> argparse.Action:  # type: ignore[override]
        action = super().add_argument(*args, **kwargs)
        if action.help is None and _meaningful_default(action):
            action.help = "(default: %(default)s)"  # argparse shows nothing for an option without help
        return action

    def error(self, message: str) -> None:  # type: ignore[override]
        text = " ".join(str(message).split())
        self.exit(EXIT_USAGE, f"dxrf: error: {text} (see '{self.prog} --help')\n")


def _workflow_names(prefix: str | None) -> dict[str, str]:
    """Map command-line names (dashes) to workflow modules, filtered by prefix."""
    import dxrf.workflows as pkg

    names = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = info.name
        if mod.startswith("_"):
            continue
        is_bench = mod.startswith("bench_")
        if prefix == "bench" and not is_bench:
            continue
        if prefix != "bench" and is_bench:
            continue
        cli_name = mod.removeprefix("bench_") if is_bench else mod
        names[cli_name.replace("_", "-")] = mod
    return names


def _load_workflow(module: str):
    return importlib.import_module(f"dxrf.workflows.{module}")


@contextlib.contextmanager
def _client(args: argparse.Namespace) -> Iterator[object]:
    """A client for commands that make passes: remote if asked, else embedded.

    The workers of an embedded cluster write to this process's stderr: they
    are kept as quiet as this process (:func:`_quiet_distributed`), so that a
    failed task is reported once, in the command's one line. Closing the
    client closes its cluster after it, without distributed's records of the
    connections the shutdown closes (:func:`dxrf.cluster.get_client`).
    """
    from dxrf.cluster import get_client, quiet_worker_logs

    client = get_client(getattr(args, "scheduler", None), wait_for_workers=getattr(args, "wait_for_workers", None))
    try:
        if client.cluster is not None and not os.environ.get("DXRF_TRACEBACK"):
            quiet_worker_logs(client)
        yield client
    finally:
        client.close()


def _progress(args: argparse.Namespace) -> bool | None:
    """Progress bars of a command: none with --quiet, else on stderr when it is a terminal."""
    return False if getattr(args, "quiet", False) else None


def _with_client(fn):
    """Wrap a command so that it runs with a cluster client and progress bars."""

    def run(args: argparse.Namespace) -> int:
        from dxrf.core.options import options

        # a command's own checks of its arguments (e.g. its destination) run before a cluster starts
        precheck = getattr(args, "precheck", None)
        if precheck is not None:
            precheck(args)
        with _client(args), options(progress=_progress(args)):
            return fn(args)

    return run


def _names(text: str) -> list[str]:
    return comma_items(text, "column names")


def _cmd_ingest(args: argparse.Namespace) -> int:
    from dxrf import io

    kwargs = {}
    if args.format:
        kwargs["format"] = args.format
    if args.no_header:
        kwargs["header"] = False
    if args.names:
        kwargs["names"] = args.names
    if args.sep:
        kwargs["sep"] = args.sep
    if args.na_values:
        kwargs["na_values"] = args.na_values
    if args.drop:
        kwargs["drop_columns"] = args.drop
    if args.max_levels is not None:
        kwargs["max_levels"] = args.max_levels
    if args.levels_from:
        kwargs["like"] = args.levels_from
    # a large CSV or Parquet file is ingested on a cluster's workers; small ones (and
    # --scheduler none) in this process, without starting a cluster
    use_cluster = getattr(args, "scheduler", None) != "none" and io.worth_a_cluster(args.src, args.format)
    with _client(args) if use_cluster else contextlib.nullcontext():
        report = _ingest(io, args, kwargs, parallel=None if use_cluster else False)
    print(report)
    return 0


def _ingest(io: Any, args: argparse.Namespace, kwargs: dict, parallel: bool | None) -> Any:
    return io.ingest(
        args.src,
        args.dest,
        target=args.target,
        chunk_rows=args.chunk_rows,
        missing_level=args.missing_level,
        nan_policy=args.nan_policy,
        handle_unknown=args.handle_unknown,
        overwrite=args.overwrite,
        # a row counter for people watching a terminal; none in logs and pipes,
        # where stderr then holds nothing but a possible one-line error
        progress=sys.stderr.isatty() and not getattr(args, "quiet", False),
        storage_options=storage_options(args),
        parallel=parallel,
        **kwargs,
    )


def _cmd_split(args: argparse.Namespace) -> int:
    from dxrf.io.files import DestinationExistsError
    from dxrf.io import split_zarr
    from dxrf.core.options import get_options

    try:
        train, test = split_zarr(args.src, args.train, args.test, fraction=args.fraction, seed=args.seed,
                                 overwrite=args.overwrite, progress=get_options().progress,
                                 storage_options=storage_options(args))
    except DestinationExistsError:
        # the training group is checked first
        from dxrf.io.storage import check_any_destination

        try:
            check_any_destination(args.train, kind="data", overwrite=False, storage_options=storage_options(args))
            dest = args.test
        except DestinationExistsError:
            dest = args.train
        raise CommandError(f"{dest} exists; pass --overwrite to replace it") from None
    print(f"train: {train.n_rows} rows -> {args.train}")
    print(f"test:  {test.n_rows} rows -> {args.test} (fraction {args.fraction}, seed {args.seed})")
    return 0


def _info_predictions(path: str, options: dict | None) -> int:
    from dxrf.io.predictions import open_predictions

    pred, attrs = open_predictions(path, storage_options=options)
    outputs = 1 if pred.ndim == 1 else pred.shape[1]
    print(f"path:     {path}")
    print("content:  predictions (array y_pred)")
    print(f"rows:     {pred.shape[0]}")
    print(f"outputs:  {outputs} (chunks of {pred.chunks[0][0]} rows, dtype {pred.dtype})")
    if attrs.get("classes") is not None:
        print(f"classes:  {list(attrs['classes'])} (y_pred holds class codes)")
    print(f"model:    {attrs.get('model')}")
    print(f"source:   {attrs.get('source')}")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from dxrf import io
    from dxrf.io.files import group_kind
    from dxrf.io.storage import resolve
    from dxrf.io.predictions import is_prediction_group

    options = storage_options(args)
    if is_prediction_group(args.path, options):
        return _info_predictions(args.path, options)
    loc = resolve(args.path, options)
    if loc.local and group_kind(loc.path) == "model":
        return _info_model(args.path, options)
    try:
        ds = io.open_zarr(args.path, storage_options=options)
    except ValueError as exc:
        if "is not a dxrf group" not in str(exc):
            raise
        return _info_model(args.path, options, exc)
    X = ds.X
    print(f"path:     {args.path}")
    print(f"rows:     {X.shape[0]}")
    print(f"columns:  {X.shape[1]} (chunks of {X.chunks[0][0]} rows, dtype {X.dtype})")
    print(f"target:   {ds.attrs.get('target')}")
    if ds.classes:
        print(f"classes:  {list(ds.classes)}")
    print(f"source:   {ds.attrs.get('source')}")
    names = list(ds.columns)
    shown = ", ".join(names[:8]) + (f", ... ({len(names) - 8} more)" if len(names) > 8 else "")
    print(f"names:    {shown}")
    return 0


def _info_model(path: str, options: dict | None, not_data: Exception | None = None) -> int:
    """``dxrf info`` on a model file: what it is, its features and bandwidth, what it was fitted on, what it predicts."""
    import dxrf
    from dxrf.cli.fit_summary import fitted_bandwidth
    from dxrf.features.maps import format_bandwidth

    try:
        model, metadata = dxrf.load(path, with_metadata=True, storage_options=options)
    except ValueError as exc:
        if not_data is not None and "not a dxrf model" in str(exc):
            raise not_data from None  # neither a data group nor a model: the data group's message
        raise
    kernel = getattr(model, "kernel_", None)
    print(f"path:     {path}")
    print(f"model:    {type(model).__name__}")
    if kernel is not None:
        features = getattr(model, "features_", model)
        print(f"features: {type(features).__name__}, {kernel.n_components} features of {kernel.n_features_in} "
              f"input columns ({kernel.activation})")
        bandwidth = fitted_bandwidth(model) if features is not model else getattr(model, "bandwidth_", None)
        if bandwidth is not None:
            print(f"bandwidth: {format_bandwidth(bandwidth)}")
    columns = (metadata or {}).get("columns")
    n_in = getattr(model, "n_features_in_", None)
    if columns:
        shown = ", ".join(map(str, columns[:8])) + (f", ... ({len(columns) - 8} more)" if len(columns) > 8 else "")
        print(f"inputs:   {len(columns)} columns: {shown}")
    elif n_in is not None:
        print(f"inputs:   {n_in} columns")
    classes = getattr(model, "classes_", None)
    classes = (metadata or {}).get("classes") or (None if classes is None else [c.item() if hasattr(c, "item") else c for c in classes])
    if classes:
        print(f"classes:  {list(classes)}")
    elif callable(getattr(model, "predict", None)):
        print("predicts: a number (regression)")
    else:
        print("predicts: nothing (a feature map: transform only)")
    return 0


def _run_workflow(args: argparse.Namespace) -> int:
    from dxrf.core.options import options

    module = _load_workflow(args.workflow_module)
    data_sets = getattr(module, "data_sets", None)
    if data_sets is not None:
        from dxrf.datasets import require

        # every real data set of the run, checked before a cluster starts: one line names all that is
        # missing; `reproduce` fetches them as its workflows' loads would, `bench` only reads
        require(data_sets(args), download=args.command == "reproduce")
    with options(progress=_progress(args)):
        if getattr(module, "NEEDS_CLIENT", False):
            with _client(args):
                module.run(args)
        else:
            module.run(args)
    return 0


def _add_workflow_commands(sub: argparse._SubParsersAction, command: str, help_text: str, common) -> None:
    parser = sub.add_parser(command, help=help_text, parents=[common])
    names = _workflow_names("bench" if command == "bench" else None)
    wsub = parser.add_subparsers(dest="workflow", metavar="NAME", required=True)
    for cli_name, mod in sorted(names.items()):
        module = _load_workflow(mod)
        # the papers' figure names use a capital M (fig2-error-vs-M): accept both spellings
        aliases = [cli_name.replace("-vs-m", "-vs-M")] if "-vs-m" in cli_name else []
        wp = wsub.add_parser(cli_name, aliases=aliases, help=getattr(module, "DESCRIPTION", ""), parents=[common])
        module.add_arguments(wp)
        wp.set_defaults(func=_run_workflow, workflow_module=mod)


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=argparse.SUPPRESS,  # so a subcommand's copy never resets a value given before it
        help="Dask scheduler to attach to (default: $DASK_SCHEDULER_ADDRESS, else an embedded local cluster; "
        "'none': ingest in this process)",
    )
    common.add_argument(
        "--wait-for-workers",
        metavar="SECONDS",
        default=argparse.SUPPRESS,
        help="with --scheduler: give up when the scheduler has no worker after this many seconds "
        "(default: $DXRF_WAIT_FOR_WORKERS, else 60)",
    )
    common.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS,
        help="no progress bars or row counters on stderr (they are drawn only when stderr is a terminal)",
    )
    common.add_argument(
        "--storage-option",
        metavar="KEY=VALUE",
        type=parse_storage_option,
        action="append",
        default=argparse.SUPPRESS,
        help="an fsspec storage option for s3://, gs://, ... paths (e.g. endpoint_url=http://127.0.0.1:9000); "
        "repeatable; VALUE is parsed as JSON where it parses, else taken as a string; fsspec's own "
        "configuration (FSSPEC_S3_* variables, ~/.config/fsspec) applies too",
    )
    parser = _Parser(
        prog="dxrf", description="Kernel learning with data-dependent random features on Dask.", parents=[common]
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("ingest", help="convert CSV / Parquet / NumPy / LibSVM into a dxrf zarr group", parents=[common])
    p.add_argument("src", help="input file (.csv, .csv.gz, .parquet, .npy, .npz, .svm/.libsvm)")
    p.add_argument("dest", type=lasting_destination, help="output zarr group (e.g. data.zarr)")
    p.add_argument("--target", default=None, help="target column name (CSV/Parquet) or index (NumPy)")
    p.add_argument("--chunk-rows", type=int, default=50_000, help="rows per chunk")
    p.add_argument("--format", default=None, choices=["csv", "parquet", "npy", "npz", "libsvm"],
                   help="source format (default: from the file name's suffix)")
    p.add_argument("--no-header", action="store_true", help="CSV has no header row")
    p.add_argument("--names", type=_names, default=None, help="comma-separated column names (CSV without header)")
    p.add_argument("--sep", default=None, help="CSV separator (default: ',', a tab for .tsv)")
    p.add_argument("--na-values", action="append", default=None, help="extra strings read as missing")
    p.add_argument("--missing-level", action="store_true", help="keep missing categories as their own level")
    p.add_argument("--nan-policy", choices=["error", "drop"], default="error",
                   help="rows with a missing or non-finite number: stop with an error, or drop them")
    p.add_argument("--drop", type=_names, action="extend", default=None, metavar="COL[,COL]",
                   help="columns to leave out (e.g. a saved row index); repeatable")
    p.add_argument("--levels-from", metavar="TRAIN.zarr", default=None,
                   help="encode like this ingested training group: its one-hot levels, classes and column order "
                        "(the new group keeps its own column statistics)")
    p.add_argument("--handle-unknown", choices=["error", "ignore"], default="error",
                   help="a category value not among the --levels-from levels: stop with an error naming column, "
                        "value and row, or encode it as an all-zero one-hot row")
    p.add_argument("--max-levels", type=int, default=None, metavar="N",
                   help="refuse a categorical column with more than N distinct values (default 1000)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing dxrf group at DEST")
    p.set_defaults(func=_cmd_ingest)

    p = sub.add_parser("split", help="split a dxrf zarr group into training and test groups by a hash of the row index",
                       parents=[common])
    p.add_argument("src", help="a dxrf zarr group")
    p.add_argument("train", help="the training group to write (e.g. train.zarr)")
    p.add_argument("test", help="the test group to write (e.g. test.zarr)")
    p.add_argument("--fraction", type=float, default=0.2, help="share of rows in the test group")
    p.add_argument("--seed", type=int, default=0, help="seed of the row hash")
    p.add_argument("--overwrite", action="store_true", help="replace existing dxrf groups at TRAIN and TEST")
    p.set_defaults(func=_with_client(_cmd_split))

    p = sub.add_parser("info", help="describe a dxrf zarr group", parents=[common])
    p.add_argument("path", help="a data group from `dxrf ingest` or `dxrf split`, or predictions of `dxrf predict`")
    p.set_defaults(func=_cmd_info)

    from dxrf.cli.models import add_model_commands

    add_model_commands(sub, common, _with_client)

    from dxrf.cli.data import add_data_commands

    add_data_commands(sub, common)

    _add_workflow_commands(sub, "reproduce", "run an experiment from workflows/", common)
    _add_workflow_commands(sub, "bench", "run a benchmark from workflows/", common)
    return parser


@contextlib.contextmanager
def _one_line_warnings() -> Iterator[None]:
    """Warnings as one ``dxrf: warning: ...`` line on stderr (no source line, no file name)."""
    previous = warnings.formatwarning
    warnings.formatwarning = lambda message, category, *args, **kwargs: f"dxrf: warning: {message}\n"
    try:
        yield
    finally:
        warnings.formatwarning = previous


@contextlib.contextmanager
def _quiet_distributed() -> Iterator[None]:
    """Keep distributed's own log records (tracebacks of a lost scheduler, worker chatter) off stderr.

    A command reports a failure in one line of its own; distributed would
    first print dozens of lines about the same event. ``DXRF_TRACEBACK=1``
    keeps them.
    """
    if os.environ.get("DXRF_TRACEBACK"):
        yield
        return
    from dxrf.cluster import quiet_logs

    restore = quiet_logs()
    try:
        yield
    finally:
        restore()


def _broken_pipe() -> int:
    """The reader of stdout went away (``dxrf info ... | head``): stop quietly.

    As Python's documentation advises for SIGPIPE: point stdout at devnull so
    that the interpreter's final flush does not fail again.
    """
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 1  # the status Python itself exits with on EPIPE


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM ends a command as Ctrl-C does: its writers remove their temporary files on the way out."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dxrf`` command."""
    from dxrf.io.files import DestinationExistsError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit:  # --help and usage errors: their text may meet a closed pipe too
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _broken_pipe()
        raise
    try:
        with _quiet_distributed(), _one_line_warnings(), _terminate_as_interrupt():
            status = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return status
    except BrokenPipeError:
        return _broken_pipe()
    except KeyboardInterrupt:
        print("dxrf: interrupted", file=sys.stderr)
        return 130
    except DestinationExistsError as exc:
        print(f"dxrf: error: {exc.message('--overwrite')}", file=sys.stderr)
        return EXIT_USAGE
    except (CommandError, ValueError, TypeError, KeyError, FileNotFoundError, FileExistsError, OSError) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"dxrf: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # e.g. a corrupt chunk (zarr codec RuntimeError), a lost cluster
        if os.environ.get("DXRF_TRACEBACK"):
            raise
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"dxrf: error: {type(exc).__name__}: {text} (set DXRF_TRACEBACK=1 for a traceback)", file=sys.stderr)
        return EXIT_USAGE


