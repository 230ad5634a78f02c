"""The host's write services, the same for every store: records checked and embedded, writes
planned once over each memory's head (:mod:`.plan`) and handed to the store in one transaction
(:mod:`.ingest`), and re-embedding into another vector space with the lock that keeps writes out
of its last step (:mod:`.reembed`). See docs/store.md.

The package imports none of its modules.
"""
