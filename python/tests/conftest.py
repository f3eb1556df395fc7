"""Shared fixtures: a fresh database file per test, and the record types the tests use."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Dict, List, Optional

import pytest

import tessera


class Level(enum.Enum):
    Low = 1
    High = 2


@tessera.record(key="id", indexes=["priority"], unique=["email"])
@dataclasses.dataclass
class Task:
    id: int
    title: str
    priority: int
    email: Optional[str] = None


@dataclasses.dataclass
class Address:
    city: str
    zip: Optional[str] = None


@tessera.record(key="name")
@dataclasses.dataclass
class Person:
    name: str
    age: int
    score: float
    active: bool
    avatar: bytes
    address: Address
    tags: List[str]
    level: Level
    born: datetime.datetime
    extra: Dict[str, int]
    nickname: Optional[str] = None


@pytest.fixture
def db(tmp_path):
    database = tessera.open(tmp_path / "test.tessera")
    yield database
    database.close()


@pytest.fixture
def tasks(db):
    return db.collection(Task)
