"""The built-in retrieval channels, one module each, each registered where it lives (its
``register_candidate_sources`` hook): :mod:`.lexical` (BM25), :mod:`.vector` (cosine),
:mod:`.importance` (the importance prior); and the channel contract every channel implements,
built-in or plugin (:mod:`.base`). A channel runs on every store whose read snapshot offers
the reader capability it declares (docs/writing-plugins.md, "Writing a candidate source").

The package imports none of its modules.
"""
