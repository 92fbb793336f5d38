"""qrmd: the node daemon (composition root). ``__version__`` is the installed release."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("qrmd")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
