"""The one pass engine: every pass of dxrf over rows of data runs through here.

- :mod:`~dxrf.engine.blocks`: row blocks, their global starts, aligned columns, tile grids;
- :mod:`~dxrf.engine.checks`: checks every block of a pass gets;
- :mod:`~dxrf.engine.split`: row groups: validation rows and folds by a hash of the global row index, or given per row;
- :mod:`~dxrf.engine.ship`: read-only arguments shipped once (scattered above a size);
- :mod:`~dxrf.engine.lanes`: chains of chunks on the worker holding them, and uneven chunks re-cut evenly;
- :mod:`~dxrf.engine.reduce`: the memory-capped tree reduction;
- :mod:`~dxrf.engine.run`: :class:`Pass` and :func:`run_pass`, in process or on Dask;
- :mod:`~dxrf.engine.maps`: :func:`map_rows`, row-wise results (features, predictions);
- :mod:`~dxrf.engine.cache`: the feature cache of iterative fits (features computed once per fit, within a budget).

The contract is in DESIGN.md ("The pass engine").
"""

from dxrf.engine.blocks import Rows, aligned_blocks, cut_tiles, row_starts, tile_grid
from dxrf.engine.checks import check_block, check_columns
from dxrf.engine.maps import map_rows
from dxrf.engine.reduce import MERGE_BYTES, fan_in, tree_reduce
from dxrf.engine.run import LocalPool, Pass, run_pass
from dxrf.engine.ship import ship
from dxrf.engine.split import block_groups, fold_labels, group_rows, hashed_folds, hashed_split, row_uniforms

__all__ = [
    "MERGE_BYTES",
    "LocalPool",
    "Pass",
    "Rows",
    "aligned_blocks",
    "check_block",
    "check_columns",
    "cut_tiles",
    "fan_in",
    "fold_labels",
    "block_groups",
    "group_rows",
    "hashed_folds",
    "hashed_split",
    "map_rows",
    "row_starts",
    "row_uniforms",
    "run_pass",
    "ship",
    "tile_grid",
    "tree_reduce",
]
