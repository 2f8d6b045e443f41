"""``python -m dxrf.cli``: the ``dxrf`` command."""

import sys

from dxrf.cli.commands import main

sys.exit(main())
