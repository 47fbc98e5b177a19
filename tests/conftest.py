"""Shared helpers: write with a private Session into memory, read back with bread."""

from __future__ import annotations

import io
import os
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


#: The hot path this run goes through. ``make test`` runs the whole suite twice, as
#: msgpack-python does: once with the C fast path, once with ``BLOG_PURE_PYTHON=1``.
HOT_PATH = "c" if blog.accel.speedups is not None else "python"


def pytest_report_header(config) -> str:
    return f"blog hot path: {HOT_PATH} (BLOG_PURE_PYTHON={os.environ.get('BLOG_PURE_PYTHON', '')!r})"


@pytest.fixture
def hot_path() -> str:
    """The hot path of this run: "c" or "python"."""
    return HOT_PATH


@pytest.fixture
def logged(hot_path) -> Logged:
    return Logged()


@pytest.fixture
def make_logged(hot_path) -> Callable[..., Logged]:
    return Logged
