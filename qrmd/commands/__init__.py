"""Sub-commands of the ``qrmd`` CLI, one module each, registered in ``qrmd.cli.COMMANDS``."""
