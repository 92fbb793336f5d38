"""Sub-commands of the ``qrmd`` CLI, one module each, registered in ``qrmd.cli.COMMANDS``."""

__all__ = ["CommandError"]


class CommandError(Exception):
    """A failure a sub-command reports to the operator as one line (``qrmd.cli`` prints it).

    It lives here, not in ``qrmd.cli``, so that a command raising it and the CLI catching it
    share one class even when the CLI runs as ``python -m qrmd.cli`` (``__main__``).
    """
