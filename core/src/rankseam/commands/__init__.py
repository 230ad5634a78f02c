"""Sub-commands of the ``rankseam`` CLI, one module per concern, loaded lazily by cli.py."""
