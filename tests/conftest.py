"""The fixtures every test file may ask for: the hot path of the run, and private sessions
writing into memory (``helpers.Logged``)."""

from __future__ import annotations

import os
from typing import Callable

import pytest

import blog
from helpers import Logged


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
