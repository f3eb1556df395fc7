"""A Python and a Rust program share one file: the Rust side is the `shared_file` example of
the tessera crate (a `#[derive(Record)]` Note), found through $TESSERA_SHARED_FILE_BIN or in
the cargo target directory; the tests are skipped, saying so, when it is not built."""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import subprocess
from pathlib import Path
from typing import List, Optional

import pytest

import tessera

REPO = Path(__file__).resolve().parents[2]


def shared_file_binary() -> Optional[str]:
    configured = os.environ.get("TESSERA_SHARED_FILE_BIN")
    if configured:
        return configured
    targets = [os.environ.get("CARGO_TARGET_DIR"), str(REPO / "target")]
    for target in filter(None, targets):
        for profile in ("debug", "release"):
            candidate = Path(target) / profile / "examples" / "shared_file"
            if candidate.exists():
                return str(candidate)
    return None


BINARY = shared_file_binary()
pytestmark = pytest.mark.skipif(BINARY is None, reason="build it: cargo build -p tessera --example shared_file")


class Level(enum.Enum):
    Low = "low"
    High = "high"


@tessera.record(key="id", indexes=["priority"], name="note")
@dataclasses.dataclass
class Note:
    id: int
    title: str
    priority: int
    tags: List[str]
    level: Level
    due: Optional[str] = None


def rust(path: Path, *arguments: str) -> str:
    done = subprocess.run([BINARY, str(path), *arguments], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_python_reads_what_rust_wrote_and_rust_reads_what_python_wrote(tmp_path):
    path = tmp_path / "shared.tessera"
    rust(path, "write", "1", "3")
    with tessera.open(path) as db:
        notes = db.collection(Note)
        assert notes.get(2) == Note(2, "rust 2", 2, ["rust"], Level.High)
        notes.insert(Note(10, "python", 9, ["py"], Level.Low, due="friday"))
    lines = [json.loads(line) for line in rust(path, "read").splitlines()]
    assert lines[-1] == {"id": 10, "title": "python", "priority": 9, "tags": ["py"], "level": "Low", "due": "friday"}
    assert len(lines) == 4


def test_both_processes_use_the_file_at_once(tmp_path):
    path = tmp_path / "shared.tessera"
    with tessera.open(path) as db:
        notes = db.collection(Note)
        live = notes.subscribe("priority >= 0")
        assert next(live).result == []
        notes.insert(Note(100, "from python", 1, [], Level.Low))
        # While this process holds the file open, the Rust process reads and writes it.
        assert "from python" in rust(path, "read")
        rust(path, "write", "1", "2")
        assert [note.id for note in notes.query()] == [1, 2, 100]
        assert notes.get(1).title == "rust 1"
