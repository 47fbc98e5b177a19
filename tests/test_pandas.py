"""bread.read_pandas: a log as one pandas DataFrame; the pandas extra beside PySpark's."""

from __future__ import annotations

import warnings

import pytest

import blog
import bread

pandas = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")


def _log(path) -> None:
    s = blog.Session()
    out = blog.FileOutputStream(path)
    c = blog.Consumer(s, out, interval=3600).start()
    log, db = s.get_logger("orders"), s.get_logger("db.pool")
    for i in range(100):
        log.info("order {} filled at {}", i, 1.5 * i)
        if i % 10 == 0:
            db.warning("pool at {}", i, size=i)
    c.stop()
    out.close()


def test_read_pandas_is_the_batches_as_one_data_frame(tmp_path):
    # Proves: one call gives every event as a row, the columns as read_batches names them,
    # the filters as bread.read's, sorted when asked; an empty result still has its columns.
    path = tmp_path / "app.blog"
    _log(path)
    df = bread.read_pandas(str(path))
    assert isinstance(df, pandas.DataFrame) and len(df) == 110
    assert list(df.columns) == list(bread.sinks.batches.COLUMNS)
    assert list(df["message"][:2]) == ["order 0 filled at 0.0", "pool at 0"]
    assert df.attrs["damage"] == []
    warn = bread.read_pandas(str(path), ["time", "category", "message"], sort=True,
                             min_severity="warning", categories="db")
    assert list(warn.columns) == ["time", "category", "message"] and len(warn) == 10
    assert warn["time"].is_monotonic_increasing and set(warn["category"]) == {"db.pool"}
    none = bread.read_pandas(str(path), ["message"], categories="nothing")
    assert len(none) == 0 and list(none.columns) == ["message"]


def test_the_pandas_installed_with_the_extras_is_one_pyspark_takes_without_a_warning():
    # Proves: the pandas and spark extras pin a pandas PySpark supports (it warns on pandas
    # 3 and refuses one below its minimum), so using both together says nothing.
    utils = pytest.importorskip("pyspark.sql.pandas.utils")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        utils.require_minimum_pandas_version()
