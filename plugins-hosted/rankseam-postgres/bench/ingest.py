"""Where PostgreSQL ingest time goes: ``Memory.ingest`` of a fresh store (the corpus of
``rankseam bench latency``: LoCoMo dev memories, then memories spliced from their turns;
pseudo-words when the data is absent; the default ``hashed`` embedder), then the revisions
statement (revisions, postings, terms) of one more batch under ``EXPLAIN (ANALYZE, BUFFERS,
WAL)``, rolled back.

    python plugins-hosted/rankseam-postgres/bench/ingest.py --size 100000
    python plugins-hosted/rankseam-postgres/bench/ingest.py --url postgresql://me@/bench

Without ``--url`` it starts a private server as ``bench/latency.py`` does (``--setting``,
``--data``). It prints and writes to ``--out`` (``report.json``, ``report.md``):

- memories per second, wall time, this process's CPU time (all threads, and the main thread
  alone: ``Memory.ingest`` checks and embeds the next batch there while another thread writes
  the current one), the server's CPU time (when it runs on this machine: its postmaster and
  every process it runs) and how busy the machine's cores were, each per memory;
- the time of ``Memory.maintain_index()`` after it (the index build);
- the revisions statement of one more batch, part by part: the revision rows (with the text
  analysis that makes each ``tsvector``), the postings, and the terms' document frequencies;
- the server's settings that bear on it.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from typing import Any

import psycopg
from latency import _settings, corpus_name, served, write_report
from psycopg import sql

import rankseam
from rankseam.bench.latency import corpus_texts
from rankseam_postgres.tables import INSERT_REVISIONS, Tables, count_tokens
from rankseam_postgres.url import parse_url


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (None: no such process here)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _postmaster(url: str) -> int | None:
    """The process id of the server's postmaster when it runs on this machine, else None:
    the parent of a backend (``pg_backend_pid()``)."""
    parsed = parse_url(url)
    # read while the connection is open: its backend ends with it (on a loaded machine the
    # process was sometimes gone before /proc was read)
    with psycopg.connect(parsed.conninfo, **parsed.connect_kwargs) as conn:
        (backend,) = conn.execute("SELECT pg_backend_pid()").fetchone()  # type: ignore[misc]
        try:
            with open(f"/proc/{backend}/comm") as f:
                here = f.read().startswith("postgres")
        except OSError:  # no such process here: the server runs elsewhere
            return None
        fields = _stat(backend) if here else None
    return None if fields is None else int(fields[1])


def _server_cpu_s(postmaster: int | None) -> float | None:
    """CPU seconds of the server: its postmaster (with the backends it has reaped) and every
    process it runs now. None when the server is not on this machine."""
    if postmaster is None:
        return None
    ticks = 0
    for pid in os.listdir("/proc"):
        fields = _stat(pid) if pid.isdigit() else None
        if fields is not None and (int(pid) == postmaster or int(fields[1]) == postmaster):
            ticks += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _cpu_ticks() -> tuple[int, int]:
    """(busy, all) jiffies of every core, from /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


def _per_memory_us(seconds: float | None, n: int) -> float | None:
    return None if seconds is None else round(seconds / n * 1e6, 1)


def ingest(target: str, records: list[dict[str, Any]], batch_size: int) -> dict[str, Any]:
    """``Memory.ingest`` of ``records`` into the fresh store at ``target``, measured."""
    postmaster = _postmaster(target)
    with rankseam.open_memory(target) as memory:
        memory.embedder.embed([r["text"] for r in records[:batch_size]])  # warm, untimed
        server0, ticks0 = _server_cpu_s(postmaster), _cpu_ticks()
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        report = memory.ingest(iter(records), batch_size=batch_size)
        wall = time.perf_counter() - t0
        client, main = time.process_time() - c0, time.thread_time() - m0
        server1, ticks1 = _server_cpu_s(postmaster), _cpu_ticks()
        t0 = time.perf_counter()
        index = memory.maintain_index()
        index_s = time.perf_counter() - t0
    n = report.records
    busy = (ticks1[0] - ticks0[0]) / max(1, ticks1[1] - ticks0[1])
    server = None if server0 is None or server1 is None else server1 - server0
    return {
        "records": n,
        "batch_size": batch_size,
        "ingest_s": round(wall, 2),
        "records_per_s": round(n / wall, 1),
        "wall_us_per_memory": _per_memory_us(wall, n),
        "client_cpu_us_per_memory": _per_memory_us(client, n),
        "client_main_thread_cpu_us_per_memory": _per_memory_us(main, n),
        "server_cpu_us_per_memory": _per_memory_us(server, n),
        "cores": os.cpu_count(),
        "cores_busy_share": round(busy, 3),
        "index_build_s": round(index_s, 2),
        "index": None if index is None else str(index),
    }


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    out = [plan]
    for child in plan.get("Plans", []):
        out.extend(_nodes(child))
    return out


def explain_batch(url: str, schema: str, texts: list[str]) -> dict:
    """The revisions statement of one more batch (``texts``), under EXPLAIN ANALYZE, rolled
    back: milliseconds per part and microseconds per memory."""
    batch_size = len(texts)
    parsed = parse_url(url)
    tables = Tables(schema)
    with psycopg.connect(parsed.conninfo, **parsed.connect_kwargs) as conn:
        (text_search,) = conn.execute(
            sql.SQL("SELECT value FROM {}.meta WHERE key = 'text_search'").format(
                sql.Identifier(schema)
            )
        ).fetchone()  # type: ignore[misc]
        (top,) = conn.execute(
            sql.SQL("SELECT coalesce(max(rid), 0) FROM {}.revisions").format(sql.Identifier(schema))
        ).fetchone()  # type: ignore[misc]
        now = time.time()
        rows = [  # REVISION_COLUMNS, in order
            (
                "default",
                top + i + 1,
                f"explain-{uuid.uuid4().hex}",
                1,
                text,
                0.5,
                "{}",
                now,
                f"explain-{i}",
                True,
                count_tokens(text),
                None,  # thread
                None,  # position
                None,  # derived_from
            )
            for i, text in enumerate(texts)
        ]
        columns = [list(col) for col in zip(*rows, strict=True)]
        query = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON) ") + tables(INSERT_REVISIONS)
        (doc,) = conn.execute(query, [text_search, *columns]).fetchone()  # type: ignore[misc]
        conn.rollback()
    root = doc[0]
    nodes = _nodes(root["Plan"])

    def insert_ms(relation: str) -> float:
        node = next(
            n
            for n in nodes
            if n.get("Node Type") == "ModifyTable" and n["Relation Name"] == relation
        )
        return float(node["Actual Total Time"])

    total = float(root["Execution Time"])
    revisions, terms = insert_ms("revisions"), insert_ms("terms")
    analysis = next(
        float(n["Actual Total Time"])
        for n in nodes
        if n.get("Node Type") == "Function Scan" and n.get("Alias") == "u"
    )
    postings_ms = total - revisions - terms  # the rest: the lexemes unnested and their rows
    parts = {
        "revision rows, with their text analysis": revisions,
        "of which the arrays' rows and the text analysis": analysis,
        "postings (the tsvectors' lexemes, one row and index entry each)": postings_ms,
        "terms' document frequencies": terms,
        "the whole statement": total,
    }
    postings = sum(
        int(n.get("Actual Rows", 0) * n.get("Actual Loops", 1))
        for n in nodes
        if n.get("Node Type") == "CTE Scan" and n.get("Alias") == "p"
    )
    return {
        "memories": batch_size,
        "postings": postings,
        "parts_ms": {k: round(v, 1) for k, v in parts.items()},
        "parts_us_per_memory": {k: round(v / batch_size * 1000, 1) for k, v in parts.items()},
    }


def _markdown(report: dict[str, Any]) -> str:
    r = report["ingest"]
    lines = [
        f"# PostgreSQL ingest, {r['records']} memories ({report['corpus']}, batches of "
        f"{r['batch_size']})",
        "",
        "| figure | value |",
        "|---|---|",
        f"| memories/s | {r['records_per_s']} ({r['ingest_s']} s) |",
        f"| wall per memory | {r['wall_us_per_memory']} µs |",
        f"| client CPU per memory (main thread) | {r['client_cpu_us_per_memory']} µs "
        f"({r['client_main_thread_cpu_us_per_memory']} µs) |",
        f"| server CPU per memory | {r['server_cpu_us_per_memory']} µs |",
        f"| cores busy ({r['cores']} cores) | {r['cores_busy_share']:.0%} |",
        f"| index build (`maintain_index()`) | {r['index_build_s']} s |",
        "",
        f"One more batch's revisions statement ({report['explain']['memories']} memories, "
        f"{report['explain']['postings']} postings), `EXPLAIN ANALYZE`, rolled back:",
        "",
        "| part | ms | µs per memory |",
        "|---|---|---|",
    ]
    e = report["explain"]
    for part, ms in e["parts_ms"].items():
        lines.append(f"| {part} | {ms} | {e['parts_us_per_memory'][part]} |")
    lines += [
        "",
        f"load average {report['load_before']} -> {report['load_after']}",
        "server settings: " + ", ".join(f"{k}={v}" for k, v in report["server"].items()),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", default=None, help="a postgresql:// URL [default: a private server]"
    )
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--out", default="bench-out/postgres-ingest")
    parser.add_argument("--data", default=None, help="the private server's data under here")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    with served(args.url, args.data, args.setting) as (url, _started):
        corpus = corpus_name()
        schema = f"bench_ingest_{uuid.uuid4().hex[:6]}"
        sep = "&" if "?" in url else "?"
        load_before = os.getloadavg()
        report: dict[str, Any] = {"corpus": corpus, "schema": schema}
        # the corpus once: the ingest's records, then the texts of the batch explained
        records = list(corpus_texts(corpus, args.size + args.batch_size))
        target = f"{url}{sep}schema={schema}"
        report["ingest"] = ingest(target, records[: args.size], args.batch_size)
        more = [r["text"] for r in records[args.size :]]
        report["explain"] = explain_batch(url, schema, more)
        report["load_before"] = [round(x, 2) for x in load_before]
        report["load_after"] = [round(x, 2) for x in os.getloadavg()]
        report["server"] = _settings(url)
    write_report(args.out, report, _markdown(report))


if __name__ == "__main__":
    main()
