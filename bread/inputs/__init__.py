"""Inputs: what bread reads, found once, opened, and said what it is (``opener``).

Paths, patterns, directories, sets' base names, ``-`` for standard input, URLs of
object storage and binary file objects (``paths``). A directory stands for its log
files (names ending ``.blog`` or ``.blog.gz``) in name order, which for a rotated set is
time order (``blogstore.fileset``); of ``x.blog`` and ``x.blog.gz`` (a compression under
way) only ``x.blog`` is read. Of compacted files and the originals they replace (``bread
compact``), one or the other is read, never both (``blogstore.catalog``). Reading a time
window, files that the directory's manifest (``blogstore.manifest``) shows to be outside
it are not opened (``Inputs.kept``). A pattern is expanded here too (for shells that do
not, and for the library); a path that exists is never taken for a pattern. A rotated
set's base name (``logs/app.blog``, the name given to ``blog.basic_config``), which names
no file, stands for the set's files by the same rules (``paths.set_files``).

A gzip-compressed input is recognized by its first bytes, not its name, and read
through ``zlib`` (``compressed``); a compressed stream cut short ends the input and is
reported as damage. A URL (``s3://``, ``gs://``, ``hdfs://``, ``file://``) is read from
its store (``objectstore``, its listings bounded by ``lister``), by the same rules.
Following (``bread -F``): ``follow`` (a directory, a set) and ``tail`` (a file as it grows).
"""

from .opener import BLOG, CXX, Input, Inputs, Source, kind_of, open_path, sniff, spool
from .paths import STDIN, expand, is_url, name_text, object_store

__all__ = ["BLOG", "CXX", "STDIN", "Input", "Inputs", "Source", "expand", "is_url", "kind_of",
           "name_text", "object_store", "open_path", "sniff", "spool"]
