"""tessera from Python in one page: a collection of dataclasses, a query, a transaction, a live
query and the dictionary. Run: python python/examples/quickstart.py [PATH]"""

import dataclasses
import os
import sys
import tempfile
import threading

import tessera
from tessera import C


@tessera.record(key="id", indexes=["priority"])
@dataclasses.dataclass
class Task:
    id: int
    title: str
    priority: int
    done: bool = False


path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "tasks.tessera")
with tessera.open(path) as db:
    tasks = db.collection(Task)
    tasks.upsert(Task(1, "write the docs", 5))
    with db.write():  # one transaction: both or neither
        tasks.upsert(Task(2, "fix the bug", 9))
        tasks.upsert(Task(3, "water the plants", 1))
    print("urgent:", [t.title for t in tasks.query(C.priority > 4)])
    print("plan:", tasks.explain("priority > 4"))

    live = tasks.subscribe("done == false")
    print("open at first:", len(next(live).result))
    threading.Thread(target=tasks.patch, args=(2,), kwargs={"done": True}).start()
    change = next(live)
    print("after a commit:", len(change.result), "open; deleted from the result at", change.deletions)

    settings = db.dictionary()
    settings["theme"] = {"dark": True}
    print("theme:", settings["theme"])
print("stored in", path)
