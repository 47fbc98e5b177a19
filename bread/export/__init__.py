"""``bread export``'s library: the events table and a typed table per call site as Parquet
(``parquet``; the command line is ``bread.cli.export``)."""
