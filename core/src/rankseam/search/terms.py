"""How a natural-language query becomes search terms: a bag of words, never query syntax.

The text is split into Unicode word tokens (``\\w+``), lower-cased, single letters dropped
(digits kept), English stop words dropped (all kept when nothing else remains), each term kept
once, in order of first appearance, at most :data:`MAX_TERMS`. The SQLite store's lexical
channel OR-joins these terms; a store plugin's lexical source can use the same analysis
(``rankseam.plugin.channels.query_terms``) so that both stores search the same words.
"""

from __future__ import annotations

import re

__all__ = ["MAX_TERMS", "STOPWORDS", "query_terms"]

#: Most terms kept from one query (the first ones, after stop words are dropped).
MAX_TERMS = 32

_TOKEN = re.compile(r"\w+", re.UNICODE)


#: English function words and question words; they match most memories and rank none.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t d ll m re ve don didn doesn isn wasn weren won wouldn shouldn couldn also ever
    """.split()
)


def query_terms(query: str, *, stopwords: bool = True) -> list[str]:
    """Distinct terms of ``query`` in order of first appearance (at most :data:`MAX_TERMS`)."""
    seen: dict[str, None] = {}
    for token in _TOKEN.findall(query.lower()):
        if len(token) < 2 and not token.isdigit():
            continue
        if stopwords and token in STOPWORDS:
            continue
        seen.setdefault(token, None)
    terms = list(seen)
    if not terms and stopwords:
        return query_terms(query, stopwords=False)
    return terms[:MAX_TERMS]
