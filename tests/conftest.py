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


@pytest.fixture(params=["c", "python"])
def hot_path(request, monkeypatch) -> str:
    """Run a test through the C fast path and through the pure-Python reference."""
    if request.param == "python":
        monkeypatch.setattr(blog.accel, "speedups", None)
    elif blog.accel.speedups is None:
        pytest.skip("the C fast path is not built here")
    return request.param


@pytest.fixture
def logged(hot_path) -> Logged:
    return Logged()


@pytest.fixture
def make_logged(hot_path) -> Callable[..., Logged]:
    return Logged
