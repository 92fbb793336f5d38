"""``python -m qrmd``: the ``qrmd`` command, without the installed script (the demo starts
``qrmd run`` this way, with its own interpreter).
"""

import sys

from qrmd.cli import main

sys.exit(main())
