"""blog's pytest plugin (entry point ``pytest11``): the ``blog_capture`` fixture.

pytest loads it at every start, in every project where blog is installed: it imports
``blog.testing`` (and the writer with it) only when a test asks for the fixture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:
    from .testing import Captured

__all__ = ["blog_capture"]


@pytest.fixture
def blog_capture() -> Iterator[Captured]:
    """The events the default session writes during the test (``blog.testing.capture``)::

        def test_checkout(blog_capture):
            checkout(cart)
            assert blog_capture.messages() == ["order 42 filled at 101.25"]

    The session is strict meanwhile: a format that does not fit its call raises.
    """
    from .testing import capture
    with capture() as captured:
        yield captured
