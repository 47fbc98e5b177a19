"""blog's pytest plugin (entry point ``pytest11``): the ``blog_capture`` fixture."""

from __future__ import annotations

from typing import Iterator

import pytest

from .testing import Captured, capture


@pytest.fixture
def blog_capture() -> Iterator[Captured]:
    """The events the default session writes during the test (``blog.testing.capture``)::

        def test_checkout(blog_capture):
            checkout(cart)
            assert blog_capture.messages() == ["order 42 filled at 101.25"]
    """
    with capture() as captured:
        yield captured
