"""``python -m qrmd``: the ``qrmd`` command, for a checkout without the installed script.

Running ``python -m qrmd.cli`` instead would load the CLI module twice (as ``__main__`` and as
``qrmd.cli``), so errors raised as ``qrmd.cli.CommandError`` would not be caught as one line.
"""

import sys

from qrmd.cli import main

sys.exit(main())
