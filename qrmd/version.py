"""The installed qrmd release, for ``--version``, the start-up line, the start record and
``qrmd_build_info``.

Read from the package metadata, so a wheel and an editable install both report what
``pyproject.toml`` says. A module of its own rather than ``qrmd.__version__``: a directory
called ``qrmd`` in the working directory can shadow the package's ``__init__`` (a namespace
package wins over an editable install's finder) but not its submodules.

The metadata is found as ``importlib.metadata`` finds it, the first ``qrmd-<version>.dist-info``
(or ``.egg-info``) directory on ``sys.path``, and its ``Version`` header read directly:
importing ``importlib.metadata`` (with the email, zipfile and csv modules it loads) cost about
30 ms of every ``qrmd run`` start, more than the rest of the configuration step. Only when no
such directory is on the path (a custom finder, a zip) is ``importlib.metadata`` asked.
"""

from __future__ import annotations

import os
import re
import sys

__all__ = ["VERSION", "installed_version"]

# A distribution's metadata directory: the name, a dash and the version (a wheel's, an
# egg's), or the name alone (a development egg's ``qrmd.egg-info``), then the suffix.
_METADATA_DIR = re.compile(r"^qrmd(-[^-]+)?\.(dist-info|egg-info)$", re.IGNORECASE)
_METADATA_FILE = {"dist-info": "METADATA", "egg-info": "PKG-INFO"}


def installed_version() -> str | None:
    """The installed qrmd's version, or None when qrmd is not installed."""
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in names:
            match = _METADATA_DIR.match(name)
            if match is None:
                continue
            found = _version_header(os.path.join(entry, name, _METADATA_FILE[match.group(2)]))
            if found is not None:
                return found
    return _version_from_importlib()


def _version_header(path: str) -> str | None:
    """The ``Version`` header of a metadata file (RFC 822 headers, up to the first blank line)."""
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                if key.strip().lower() == "version":
                    return value.strip()
    except OSError:
        return None
    return None


def _version_from_importlib() -> str | None:
    from importlib import metadata  # noqa: PLC0415  (only where no metadata directory is found)

    try:
        return metadata.version("qrmd")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return None


VERSION: str = installed_version() or "0+unknown"
