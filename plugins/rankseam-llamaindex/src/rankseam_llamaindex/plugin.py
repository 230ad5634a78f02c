"""The ``rankseam`` entry point: makes ``rankseam plugins`` list this integration.

It implements no hook (the integration adds classes for LlamaIndex, not components for
rankseam) and imports nothing heavy, so it costs the ``rankseam`` command nothing.
"""
