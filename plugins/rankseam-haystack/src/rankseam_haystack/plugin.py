"""The ``rankseam`` entry point: makes ``rankseam plugins`` list this integration.

It implements no hook (the integration adds a document store and components for Haystack, not
components for rankseam) and imports nothing heavy, so it costs the ``rankseam`` command
nothing.
"""
