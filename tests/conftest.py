"""Shared helpers: write with a private Session into memory, read back with bread."""

from __future__ import annotations

import io
from typing import Callable

import pytest

import blog
import bread


class Logged:
    """A private session writing into memory, and a way to read what it wrote."""

    def __init__(self, **options) -> None:
        self.session = blog.Session(**options)
        self.log = self.session.get_logger("main")
        self.out = blog.MemoryOutputStream()

    def consume(self) -> int:
        return self.session.consume(self.out)

    def read(self) -> list[bread.Event]:
        self.consume()
        self.reader = bread.read(io.BytesIO(self.out.getvalue()))
        events = list(self.reader)
        assert self.reader.damage == []
        return events


@pytest.fixture
def logged() -> Logged:
    return Logged()


@pytest.fixture
def make_logged() -> Callable[..., Logged]:
    return Logged
