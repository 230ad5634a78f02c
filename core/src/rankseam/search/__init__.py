"""The search: its pipeline (:mod:`.pipeline`: the reranker chosen, the arguments checked, the
coarse pool built and read, the seam entered once), how a question becomes terms
(:mod:`.terms`), fusion of the channels' ranked lists (:mod:`.fusion`) and the channels
themselves, one module each (:mod:`.channels`). See docs/store.md and docs/seam.md.

The package imports none of its modules: the built-in channels use the public plugin API
(:mod:`rankseam.plugin.channels`), which itself needs :mod:`.channels.base`, :mod:`.fusion` and
:mod:`.terms`.
"""
