"""The errors modules: each error subclasses the built-in it replaced (``except ValueError``
still catches it), is raised where that meaning was, and is importable where it was before."""

from __future__ import annotations

import io

import pytest

import blog
import blogformat
import bread
from blogformat import errors, placeholders, valuetypes
from blogstore import crashlayout


def test_each_error_subclasses_the_built_in_it_replaced():
    # Proves: code written against the built-ins keeps catching what blog and bread raise.
    assert issubclass(blog.ConfigurationError, ValueError)
    assert issubclass(blog.CallSiteError, blog.FormatError)
    assert issubclass(blog.FormatError, ValueError)
    assert issubclass(blog.UnsafeBufferDirectory, PermissionError)
    for cls in (bread.OptionError, bread.NotABlogFile, bread.DamagedLog, bread.BadEntry):
        assert issubclass(cls, ValueError)


def test_errors_stay_importable_where_they_were():
    # Proves: the classes moved to the errors modules are the same objects at their old homes.
    from blog.pipeline.source import CallSiteError, TooManySources
    from blog import errors as blog_errors
    assert CallSiteError is blog_errors.CallSiteError is blog.CallSiteError
    assert TooManySources is blog_errors.TooManySources
    assert placeholders.FormatError is errors.FormatError is blog.FormatError
    assert valuetypes.BadEntry is errors.BadEntry is bread.BadEntry
    assert crashlayout.UnsafeBufferDirectory is errors.UnsafeBufferDirectory
    assert blogformat.errors is errors


def test_a_bad_option_of_blog_is_a_configuration_error_with_its_message():
    # Proves: basic_config's checks raise ConfigurationError, the message unchanged.
    with pytest.raises(blog.ConfigurationError, match="mode must be 'ab', 'wb' or 'xb'"):
        blog.basic_config(io.BytesIO(), mode="rb")
    with pytest.raises(blog.ConfigurationError, match="overflow must be"):
        blog.Session().configure(overflow="wait")
    with pytest.raises(ValueError, match="rotate_every must be an interval"):
        blog.RotatingFile("never-made.blog", rotate_every="soon")


def test_a_bad_option_of_bread_is_an_option_error_with_its_message():
    # Proves: the reader's checks raise OptionError, the message unchanged.
    with pytest.raises(bread.OptionError, match="batch_size must be a positive int"):
        list(bread.Reader(io.BytesIO(b"")).batches(batch_size=0))
    with pytest.raises(bread.OptionError, match="a span is read in file order"):
        bread.Reader(io.BytesIO(b""), sort=True, span=(0, 1))
