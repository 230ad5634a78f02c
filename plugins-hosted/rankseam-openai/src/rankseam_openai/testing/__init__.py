"""A scriptable OpenAI-compatible server on loopback, with fault injection, for tests.

It speaks HTTP for real (standard library ``http.server`` in a background thread), so the client
under test goes through its whole network stack: sockets, timeouts, resets. Use it in your own
tests too::

    from rankseam_openai.testing import FakeOpenAIServer, Reply

    with FakeOpenAIServer() as server:
        server.script(Reply.rate_limited(retry_after="1"), Reply.json({"answer": "yes"}))
        options = {"base_url": server.base_url, "model": "test"}
        ...
        assert len(server.requests) == 2

Replies are taken from the script queue in order; when it is empty the *responder* (a function
of the request body) answers; without one the server answers HTTP 400 "no reply scripted".

Faults (:class:`Reply` constructors): ``delayed(s)``, ``rate_limited(retry_after)``,
``error(status)`` (500/503/...), ``reset()`` (TCP RST, no answer), ``malformed_body()``,
``json(...)`` with a schema-violating object, ``prose_around_json(...)``, ``hanging_body()``
(headers and part of the body, then nothing), ``wrong_content_type()``, ``endless_body()`` (a
200 whose body never ends, sent as fast as the client reads). :data:`FAULTS` names each;
``server.inject(name, times=None)`` applies one to the next ``times`` requests (all when None),
whatever the responder would have answered.

``server.settle()`` waits until every connection the server has accepted (or has waiting) has
been read and recorded, so that ``len(server.chat_requests)`` can be compared with what a
client counted even when the client gave up on a request the moment it was sent.
"""

from __future__ import annotations

# EXCERPT and DEFAULT_USAGE stay importable from here (this package was one module)
from rankseam_openai.testing.leaks import EXCERPT as EXCERPT
from rankseam_openai.testing.leaks import echo_shapes, exception_texts, leaked_fragment
from rankseam_openai.testing.replies import DEFAULT_USAGE as DEFAULT_USAGE
from rankseam_openai.testing.replies import (
    FAULTS,
    RecordedRequest,
    Reply,
    Responder,
    decision_responder,
    generation_responder,
    user_payload,
)
from rankseam_openai.testing.server import FakeOpenAIServer

__all__ = [
    "FAULTS",
    "FakeOpenAIServer",
    "RecordedRequest",
    "Reply",
    "Responder",
    "decision_responder",
    "echo_shapes",
    "exception_texts",
    "generation_responder",
    "leaked_fragment",
    "user_payload",
]
