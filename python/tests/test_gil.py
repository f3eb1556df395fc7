"""The GIL is released while a commit or a query runs in the extension.

A ticker thread runs pure-Python code and records ``time.perf_counter()`` at each tick while
the main thread makes one native call, timed from just before it to just after it. The switch
interval is raised to 30 s for the test, so that CPython never takes the GIL from a thread
that holds it: the only way the ticker can run, and record a tick, strictly inside the
interval of the native call is that the call released the GIL. The control (``dumps`` of a
large list, which holds the GIL throughout) shows the same probe records no tick inside a
native call that keeps the GIL.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, List, Tuple

import pytest

import tessera

from conftest import Task

RECORDS = 20_000


class Ticker:
    """A thread running pure-Python work, recording when each chunk of it ended. Between
    chunks it sleeps a tenth of a millisecond (releasing the GIL), so that the main thread
    gets the GIL back without a forced switch."""

    def __init__(self) -> None:
        self.ticks: List[float] = []
        self.iterations = 0
        self._stop = threading.Event()
        self._ticked = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(100):  # pure Python: needs the GIL
                self.iterations += 1
            with self._ticked:
                self.ticks.append(time.perf_counter())
                self._ticked.notify_all()
            time.sleep(0.0001)

    def __enter__(self) -> "Ticker":
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(30.0)
        self._thread.start()
        return self

    def wait_for_tick(self) -> None:
        """Returns once the ticker has ticked again (it is running, and ready to run more)."""
        with self._ticked:
            seen = len(self.ticks)
            assert self._ticked.wait_for(lambda: len(self.ticks) > seen, timeout=10), "the ticker did not tick"

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)
        sys.setswitchinterval(self._interval)

    def inside(self, interval: Tuple[float, float]) -> int:
        """Ticks recorded strictly inside ``interval``."""
        start, end = interval
        return sum(1 for tick in list(self.ticks) if start < tick < end)


def timed(ticker: Ticker, call: Callable[[], Any]) -> Tuple[Tuple[float, float], Any]:
    """``call()`` and the interval it ran in, once the ticker is known to be running."""
    ticker.wait_for_tick()
    start = time.perf_counter()
    result = call()
    end = time.perf_counter()
    return (start, end), result


def test_the_probe_sees_no_python_progress_inside_a_native_call_that_holds_the_gil():
    """Control: ``dumps`` holds the GIL from start to end (it reads Python objects), so the
    ticker cannot tick inside it, however long it runs."""
    big = list(range(1_000_000))
    with Ticker() as ticker:
        intervals = [timed(ticker, lambda: tessera.dumps(big))[0] for _ in range(3)]
    assert sum(end - start for start, end in intervals) > 0.01, "the control call was too short to show anything"
    assert [ticker.inside(interval) for interval in intervals] == [0, 0, 0]
    # (`timed` waited for a tick before each call: the ticker was running, ready to tick.)


def test_python_thread_progresses_inside_a_large_insert_many_commit(db, tasks):
    records = [Task(i, f"title {i}", i % 100) for i in range(RECORDS)]
    with Ticker() as ticker:
        interval, _ = timed(ticker, lambda: tasks.insert_many(records))
    assert tasks.count() == RECORDS
    assert ticker.inside(interval) > 0, "no Python tick while insert_many's commit ran: the GIL was held"


def test_python_thread_progresses_inside_a_large_write_block_commit(db, tasks):
    with Ticker() as ticker:
        with db.write():
            for i in range(RECORDS):
                tasks.insert(Task(i, "queued", 1))
            ticker.wait_for_tick()
            start = time.perf_counter()  # the block's writes are queued; leaving it commits
        interval = (start, time.perf_counter())
    assert tasks.count() == RECORDS
    assert ticker.inside(interval) > 0, "no Python tick while the write block committed: the GIL was held"


def test_python_thread_progresses_inside_a_large_delete_many_commit(db, tasks):
    tasks.insert_many([Task(i, "t", 1) for i in range(RECORDS)])
    with Ticker() as ticker:
        interval, _ = timed(ticker, lambda: tasks.delete_many(list(range(RECORDS))))
    assert tasks.count() == 0
    assert ticker.inside(interval) > 0, "no Python tick while delete_many's commit ran: the GIL was held"


@pytest.mark.parametrize("run", ["query", "count"])
def test_python_thread_progresses_inside_a_long_query(db, tasks, run):
    """A query scanning every record (``title`` has no index), run in the extension: the
    matches are fetched with the GIL released; iterating them builds the dataclasses later."""
    tasks.insert_many([Task(i, f"title {i}", i % 100) for i in range(RECORDS * 2)])
    text = 'title != "none of them"'
    assert "scan" in tasks.explain(text).lower()
    call = (lambda: iter(tasks.query(text))) if run == "query" else (lambda: tasks.count(text))
    with Ticker() as ticker:
        runs = [timed(ticker, call) for _ in range(5)]
    for _, result in runs:
        assert (len(result) if run == "query" else result) == RECORDS * 2
    assert sum(ticker.inside(interval) for interval, _ in runs) > 0, f"no Python tick while the {run} ran: the GIL was held"
