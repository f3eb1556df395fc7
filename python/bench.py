"""The Python benchmark of issue 18: tessera from Python against Python's own stores.

Runs Dflat's CRUD workload (BenchDoc objects, as `tessera-bench crud` does) and the dictionary
workload, plus the live-query latency, and writes `target/tessera-bench/python.json` in the
bench harness's format: {"table", "machine", "rows": [{"row", "unit", "tessera", "peers",
"target", "met"}]}, `met` computed from ratios to peers measured in the same run.

Peers: sqlite3 (WAL, synchronous=NORMAL, a WITHOUT ROWID table keyed by title: the Rust
bench's table and pragmas), shelve, diskcache and py-lmdb (values pickled). Every figure
includes building the Python objects (dataclasses for CRUD) on both sides.

    python python/bench.py                 # full run (10,000 objects, 40,000 dictionary keys)
    python python/bench.py --objects 2000 --keys 5000 --rounds 1   # a short run (CI)
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import pickle
import platform
import shelve
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

# Run as `python python/bench.py`, Python puts this file's directory first on the path, and
# there `tessera/` is the package's source without its built extension: import the installed
# package instead (an editable install still finds its extension through site-packages).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

import tessera  # noqa: E402

try:  # optional peers: a row without them says so
    import diskcache
except ImportError:  # pragma: no cover
    diskcache = None
try:
    import lmdb
except ImportError:  # pragma: no cover
    lmdb = None


@dataclasses.dataclass
class Vec3:
    x: float
    y: float
    z: float


class Color(enum.Enum):
    Red = 0
    Green = 1
    Blue = 2


@dataclasses.dataclass
class Text:
    text: str


@dataclasses.dataclass
class Image:
    images: List[str]


@tessera.record(key="title", name="bench_doc")
@dataclasses.dataclass
class BenchDoc:
    pos: Vec3
    color: Color
    title: str
    content: Optional[Union[Text, Image]]
    tag: str
    priority: int


def make_doc(i: int) -> BenchDoc:
    """Dflat's BenchDoc number `i` (crud_model::parts)."""
    rest = i % 3
    if rest == 0:
        color, priority, content = Color.Blue, 5000 - i, Image([f"image{i}"])
    elif rest == 1:
        color, priority, content = Color.Red, i - 5000, None
    else:
        color, priority, content = Color.Green, 0, Text(f"text{i}")
    return BenchDoc(Vec3(float(i), float(i * 2), float(i * 3)), color, f"title{i}", content, f"tag{i}", priority)


# sqlite3 --------------------------------------------------------------------------------------

SQL_COLUMNS = "title, color, priority, tag, pos, content_kind, content"


def sql_row(doc: BenchDoc) -> tuple:
    pos = json.dumps([doc.pos.x, doc.pos.y, doc.pos.z])
    if isinstance(doc.content, Image):
        kind, content = 1, json.dumps({"Image": {"images": doc.content.images}})
    elif isinstance(doc.content, Text):
        kind, content = 0, json.dumps({"Text": {"text": doc.content.text}})
    else:
        kind, content = None, None
    return (doc.title, doc.color.value, doc.priority, doc.tag, pos, kind, content)


def sql_doc(row: tuple) -> BenchDoc:
    title, color, priority, tag, pos, _kind, content = row
    x, y, z = json.loads(pos)
    value: Any = None
    if content is not None:
        ((name, payload),) = json.loads(content).items()
        value = Image(payload["images"]) if name == "Image" else Text(payload["text"])
    return BenchDoc(Vec3(x, y, z), Color(color), title, value, tag, priority)


class Sqlite:
    name = "sqlite3"

    def __init__(self, directory: str, docs: List[BenchDoc]) -> None:
        self.connection = sqlite3.connect(os.path.join(directory, "sqlite.db"), isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=NORMAL")
        self.connection.execute(
            "CREATE TABLE bench_doc (title TEXT PRIMARY KEY NOT NULL, color INTEGER NOT NULL, priority INTEGER NOT NULL, "
            "tag TEXT NOT NULL, pos BLOB NOT NULL, content_kind INTEGER, content BLOB) WITHOUT ROWID"
        )
        self.docs = docs

    def insert_all(self) -> None:
        with self.connection:
            self.connection.execute("BEGIN")
            self.connection.executemany(f"INSERT INTO bench_doc ({SQL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", [sql_row(d) for d in self.docs])

    def fetch(self, condition: str) -> List[BenchDoc]:
        return [sql_doc(row) for row in self.connection.execute(f"SELECT {SQL_COLUMNS} FROM bench_doc WHERE {condition}")]

    def fetch_priority(self) -> List[BenchDoc]:
        return self.fetch("priority > 2500")

    def fetch_image(self) -> List[BenchDoc]:
        return self.fetch("content_kind = 1")

    def update_all(self) -> None:
        with self.connection:
            self.connection.execute("BEGIN")
            for doc in self.docs:
                row = self.connection.execute(f"SELECT {SQL_COLUMNS} FROM bench_doc WHERE title = ?", (doc.title,)).fetchone()
                current = sql_doc(row)
                self.connection.execute("UPDATE bench_doc SET priority = ? WHERE title = ?", (current.priority + 1, current.title))

    def fetch_each(self) -> None:
        for doc in self.docs:
            row = self.connection.execute(f"SELECT {SQL_COLUMNS} FROM bench_doc WHERE title = ?", (doc.title,)).fetchone()
            assert sql_doc(row).title == doc.title

    def delete_all(self) -> None:
        with self.connection:
            self.connection.execute("BEGIN")
            self.connection.executemany("DELETE FROM bench_doc WHERE title = ?", [(d.title,) for d in self.docs])

    def count(self) -> int:
        return self.connection.execute("SELECT count(*) FROM bench_doc").fetchone()[0]


# tessera --------------------------------------------------------------------------------------


class Tessera:
    name = "tessera"

    def __init__(self, directory: str, docs: List[BenchDoc]) -> None:
        # Buffered durability: as sqlite's synchronous=NORMAL, a commit is safe from a process
        # kill at once and flushed shortly after.
        self.db = tessera.open(os.path.join(directory, "bench.tessera"), durability="buffered")
        self.docs = docs
        self.collection = self.db.collection(BenchDoc)

    def insert_all(self) -> None:
        self.collection.insert_many(self.docs)

    def fetch_priority(self) -> List[BenchDoc]:
        return list(self.collection.query("priority > 2500"))

    def fetch_image(self) -> List[BenchDoc]:
        return list(self.collection.query("content is Image"))

    def update_all(self) -> None:
        collection = self.collection
        with self.db.write():
            for doc in self.docs:
                current = collection.get(doc.title)
                current.priority += 1
                collection.upsert(current)

    def fetch_each(self) -> None:
        get = self.collection.get
        for doc in self.docs:
            assert get(doc.title).title == doc.title

    def delete_all(self) -> None:
        self.collection.delete_many([doc.title for doc in self.docs])

    def count(self) -> int:
        return self.collection.count()


# key-value peers, values pickled -------------------------------------------------------------


class KeyValue:
    """CRUD on a key-value store: a query reads and unpickles every value."""

    name = "kv"

    def __init__(self, docs: List[BenchDoc]) -> None:
        self.docs = docs

    def fetch_priority(self) -> List[BenchDoc]:
        return [doc for doc in self.values() if doc.priority > 2500]

    def fetch_image(self) -> List[BenchDoc]:
        return [doc for doc in self.values() if isinstance(doc.content, Image)]

    def fetch_each(self) -> None:
        for doc in self.docs:
            assert self.get(doc.title).title == doc.title


class Lmdb(KeyValue):
    name = "lmdb"

    def __init__(self, directory: str, docs: List[BenchDoc]) -> None:
        super().__init__(docs)
        self.env = lmdb.open(os.path.join(directory, "lmdb"), map_size=1 << 30, sync=False, metasync=False)

    def insert_all(self) -> None:
        with self.env.begin(write=True) as txn:
            for doc in self.docs:
                txn.put(doc.title.encode(), pickle.dumps(doc), overwrite=False)

    def values(self):
        with self.env.begin() as txn:
            return [pickle.loads(value) for _, value in txn.cursor()]

    def get(self, title: str) -> BenchDoc:
        with self.env.begin() as txn:
            return pickle.loads(txn.get(title.encode()))

    def update_all(self) -> None:
        with self.env.begin(write=True) as txn:
            for doc in self.docs:
                key = doc.title.encode()
                current = pickle.loads(txn.get(key))
                current.priority += 1
                txn.put(key, pickle.dumps(current))

    def delete_all(self) -> None:
        with self.env.begin(write=True) as txn:
            for doc in self.docs:
                txn.delete(doc.title.encode())

    def count(self) -> int:
        return self.env.stat()["entries"]


class Shelve(KeyValue):
    name = "shelve"

    def __init__(self, directory: str, docs: List[BenchDoc]) -> None:
        super().__init__(docs)
        self.shelf = shelve.open(os.path.join(directory, "shelf"))

    def insert_all(self) -> None:
        for doc in self.docs:
            self.shelf[doc.title] = doc
        self.shelf.sync()

    def values(self):
        return list(self.shelf.values())

    def get(self, title: str) -> BenchDoc:
        return self.shelf[title]

    def update_all(self) -> None:
        for doc in self.docs:
            current = self.shelf[doc.title]
            current.priority += 1
            self.shelf[doc.title] = current
        self.shelf.sync()

    def delete_all(self) -> None:
        for doc in self.docs:
            del self.shelf[doc.title]
        self.shelf.sync()

    def count(self) -> int:
        return len(self.shelf)


class DiskCache(KeyValue):
    name = "diskcache"

    def __init__(self, directory: str, docs: List[BenchDoc]) -> None:
        super().__init__(docs)
        self.cache = diskcache.Cache(os.path.join(directory, "diskcache"))

    def insert_all(self) -> None:
        with self.cache.transact():
            for doc in self.docs:
                self.cache.set(doc.title, doc)

    def values(self):
        return [self.cache[key] for key in self.cache.iterkeys()]

    def get(self, title: str) -> BenchDoc:
        return self.cache[title]

    def update_all(self) -> None:
        with self.cache.transact():
            for doc in self.docs:
                current = self.cache[doc.title]
                current.priority += 1
                self.cache.set(doc.title, current)

    def delete_all(self) -> None:
        with self.cache.transact():
            for doc in self.docs:
                del self.cache[doc.title]

    def count(self) -> int:
        return len(self.cache)


# harness --------------------------------------------------------------------------------------


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {sys.platform}, Python {platform.python_version()}"


def timed_ms(operation: Callable[[], Any]) -> float:
    start = time.perf_counter()
    operation()
    return (time.perf_counter() - start) * 1e3


class Table:
    def __init__(self, name: str) -> None:
        self.name = name
        self.rows: List[dict] = []

    def row(self, name: str, unit: str, value: float, peers: Dict[str, float], target_peer: Optional[str], factor: Optional[float]) -> None:
        target, met = None, None
        if target_peer is not None and target_peer in peers:
            base = peers[target_peer]
            target = f"<= {factor} x {target_peer} ({base * factor:.3g})"
            met = value <= base * factor
        self.rows.append({"row": name, "unit": unit, "tessera": round(value, 4), "peers": {k: round(v, 4) for k, v in peers.items()}, "target": target, "met": met})

    def row_at_most(self, name: str, unit: str, value: float, limit: float) -> None:
        self.rows.append({"row": name, "unit": unit, "tessera": round(value, 4), "peers": {}, "target": f"<= {limit}", "met": value <= limit})

    def finish(self, path: Path) -> None:
        document = {"table": self.name, "machine": machine(), "rows": self.rows}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n")
        print(f"\n{self.name} — {document['machine']}\n")
        print("| row | unit | tessera | peers | target | met |")
        print("|---|---|---|---|---|---|")
        for row in self.rows:
            peers = ", ".join(f"{name} {value:.3g} ({row['tessera'] / value:.2f}x)" if value else f"{name} {value}" for name, value in row["peers"].items())
            met = {True: "yes", False: "NO", None: ""}[row["met"]]
            print(f"| {row['row']} | {row['unit']} | {row['tessera']:.3g} | {peers} | {row['target'] or ''} | {met} |")
        print(f"\nwritten: {path}")


CRUD_STEPS = [
    ("insert {n} (one transaction)", "insert_all"),
    ("fetch priority > 2500 (index on sqlite: none, as the Rust bench)", "fetch_priority"),
    ("fetch content is Image", "fetch_image"),
    ("update {n} (one transaction, read then write each)", "update_all"),
    ("fetch {n} individually by key", "fetch_each"),
    ("delete {n} (one transaction)", "delete_all"),
]


def crud(objects: int, rounds: int, table: Table) -> None:
    docs = [make_doc(i) for i in range(objects)]
    backends: List[Callable[[str, List[BenchDoc]], Any]] = [Tessera, Sqlite, Shelve]
    if lmdb is not None:
        backends.append(Lmdb)
    if diskcache is not None:
        backends.append(DiskCache)
    times: Dict[str, Dict[str, List[float]]] = {}
    for _ in range(rounds):
        for backend in backends:
            with tempfile.TemporaryDirectory() as directory:
                store = backend(directory, docs)
                for _, step in CRUD_STEPS:
                    times.setdefault(store.name, {}).setdefault(step, []).append(timed_ms(getattr(store, step)))
                    if step == "insert_all":
                        assert store.count() == objects, store.name
                assert store.count() == 0, store.name
                if isinstance(store, Tessera):
                    store.db.close()
                if isinstance(store, Shelve):
                    store.shelf.close()
    for label, step in CRUD_STEPS:
        median = {name: statistics.median(by_step[step]) for name, by_step in times.items()}
        peers = {name: value for name, value in median.items() if name != "tessera"}
        table.row("crud: " + label.format(n=objects), "ms", median["tessera"], peers, "sqlite3", 0.5)


def dictionary(keys: int, rounds: int, table: Table) -> None:
    names = [f"key{i}" for i in range(keys)]
    values = [{"n": i, "name": f"value {i}"} for i in range(keys)]
    results: Dict[str, Dict[str, List[float]]] = {}

    def record(name: str, step: str, value: float) -> None:
        results.setdefault(name, {}).setdefault(step, []).append(value)

    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as directory:
            db = tessera.open(os.path.join(directory, "dict.tessera"), durability="buffered")
            store = db.dictionary("bench")

            def tessera_set() -> None:
                for key, value in zip(names, values):
                    store[key] = value
                store.flush()

            def tessera_get() -> None:
                get = store.get
                for key in names:
                    assert get(key) is not None

            record("tessera", "set", timed_ms(tessera_set))
            record("tessera", "get", timed_ms(tessera_get))
            db.close()
            if lmdb is not None:
                env = lmdb.open(os.path.join(directory, "lmdb"), map_size=1 << 30, sync=False, metasync=False)

                def lmdb_set() -> None:
                    # One transaction per set: a dictionary write outside any transaction.
                    for key, value in zip(names, values):
                        with env.begin(write=True) as txn:
                            txn.put(key.encode(), pickle.dumps(value))

                def lmdb_get() -> None:
                    for key in names:
                        with env.begin() as txn:
                            assert pickle.loads(txn.get(key.encode())) is not None

                record("lmdb", "set", timed_ms(lmdb_set))
                record("lmdb", "get", timed_ms(lmdb_get))
                env.close()
            if diskcache is not None:
                cache = diskcache.Cache(os.path.join(directory, "diskcache"))

                def diskcache_set() -> None:
                    for key, value in zip(names, values):
                        cache[key] = value

                def diskcache_get() -> None:
                    for key in names:
                        assert cache[key] is not None

                record("diskcache", "set", timed_ms(diskcache_set))
                record("diskcache", "get", timed_ms(diskcache_get))
                cache.close()
            shelf = shelve.open(os.path.join(directory, "shelf"))

            def shelve_set() -> None:
                for key, value in zip(names, values):
                    shelf[key] = value
                shelf.sync()

            def shelve_get() -> None:
                for key in names:
                    assert shelf[key] is not None

            record("shelve", "set", timed_ms(shelve_set))
            record("shelve", "get", timed_ms(shelve_get))
            shelf.close()
    for step in ("set", "get"):
        median = {name: statistics.median(by_step[step]) for name, by_step in results.items()}
        peers = {name: value for name, value in median.items() if name != "tessera"}
        label = f"dictionary: {step} {keys} small values"
        table.row(label + " (vs diskcache)", "ms", median["tessera"], peers, "diskcache", 0.5)
        table.row(label + " (vs py-lmdb + pickle)", "ms", median["tessera"], peers, "lmdb", 1.0)


def live(samples: int, table: Table) -> None:
    with tempfile.TemporaryDirectory() as directory:
        db = tessera.open(os.path.join(directory, "live.tessera"), durability="buffered")
        docs = db.collection(BenchDoc)
        docs.insert_many([make_doc(i) for i in range(100)])
        subscription = docs.subscribe("priority > 100000")
        next(subscription)
        latencies: List[float] = []
        commit_us: List[float] = []
        received = threading.Event()
        arrival = [0]

        def listen() -> None:
            for event in subscription:
                if isinstance(event, tessera.Changed):
                    arrival[0] = time.perf_counter_ns()
                    received.set()
                elif isinstance(event, tessera.ClosedEvent):
                    return

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        for sample in range(samples):
            batch = [make_doc(i) for i in range(100_000 + sample * 10, 100_000 + sample * 10 + 10)]
            for doc in batch:
                doc.priority = 200_000
            received.clear()
            started = time.perf_counter_ns()
            docs.insert_many(batch)
            committed = time.perf_counter_ns()
            assert received.wait(10), "the change arrived"
            commit_us.append((committed - started) / 1e3)
            latencies.append((arrival[0] - started) / 1e3)
        db.close()
        listener.join(timeout=10)
    # Measured from the start of the commit call (the event often arrives before the call
    # returns); the commit alone is reported beside it.
    table.row_at_most("live: a 10-object commit reaches a subscribed Python iterator (median, from the commit call)", "us", statistics.median(latencies), 100.0)
    table.rows.append({"row": "live: the 10-object commit alone (median)", "unit": "us", "tessera": round(statistics.median(commit_us), 4), "peers": {}, "target": None, "met": None})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--live-samples", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "target" / "tessera-bench" / "python.json")
    arguments = parser.parse_args()
    table = Table("python")
    crud(arguments.objects, arguments.rounds, table)
    dictionary(arguments.keys, arguments.rounds, table)
    live(arguments.live_samples, table)
    table.finish(arguments.out)


if __name__ == "__main__":
    main()
