"""Events as columns: batches of typed columns for pandas and Arrow (``batches``, the sink
behind ``bread.read_batches`` and the Spark data source), a typed table per call site
(``tables``) and ``bread export --parquet`` (``parquet``). pyarrow is used where it is
installed (the ``spark`` extra); nothing here is imported by ``import bread``."""
