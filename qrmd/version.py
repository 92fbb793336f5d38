"""The installed qrmd release, for ``--version``, the start-up line and ``qrmd_build_info``.

Read from the package metadata, so a wheel and an editable install both report what
``pyproject.toml`` says. A module of its own rather than ``qrmd.__version__``: a directory
called ``qrmd`` in the working directory can shadow the package's ``__init__`` (a namespace
package wins over an editable install's finder) but not its submodules.
"""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["VERSION"]

try:
    VERSION: str = version("qrmd")
except PackageNotFoundError:  # run from a checkout that was never installed
    VERSION = "0+unknown"
