"""The commands that read a journal directory: ``qrmd journal ACTION`` and ``qrmd eviction``
(``qrmd.cli`` registers them by name, as it does the others in ``qrmd.commands``)."""
