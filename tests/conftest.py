"""The fixtures every test file may ask for: the hot path of the run, private sessions
writing into memory (``helpers.Logged``), a local S3-compatible server (``s3``)."""

from __future__ import annotations

import os
from typing import Callable

import pytest

import blog
from helpers import Logged, S3Server

# Object storage in tests is the local server of the ``s3`` fixture, and nothing else: no
# instance metadata, no profile of the machine's user, dummy keys (set before any test, so
# that Spark's workers, started by a test, have them too).
os.environ.update({"AWS_EC2_METADATA_DISABLED": "true", "AWS_ACCESS_KEY_ID": "testing",
                   "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                   "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull})
for _var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
    os.environ.pop(_var, None)


#: The hot path this run goes through. ``make test`` runs the whole suite twice, as
#: msgpack-python does: once with the C fast path, once with ``BLOG_PURE_PYTHON=1``.
HOT_PATH = "c" if blog.accel.speedups is not None else "python"


def pytest_report_header(config) -> str:
    pure = os.environ.get('BLOG_PURE_PYTHON', '')
    return f"blog hot path: {HOT_PATH} (BLOG_PURE_PYTHON={pure!r})"


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


@pytest.fixture(scope="session")
def s3():
    """moto's S3 on 127.0.0.1 (``helpers.S3Server``: ``endpoint``, ``served``), skipped
    where moto's server is not installed (``pip install '.[test]'`` installs it)."""
    pytest.importorskip("moto.server", reason="moto[server] is not installed (the test extra)")
    import logging
    logging.getLogger("werkzeug").setLevel(logging.ERROR)   # no line per request
    server = S3Server()
    yield server
    server.stop()
