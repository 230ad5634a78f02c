"""Candidate retrieval: the source contract (:mod:`.base`), the built-in sources of the embedded
store (:mod:`.lexical`, :mod:`.vector`, :mod:`.importance`) and :mod:`.fusion`. See
docs/store.md.

The package imports none of its modules: the built-in sources use the public plugin API
(:mod:`rankseam.plugin`), which itself needs :mod:`.base`.
"""
