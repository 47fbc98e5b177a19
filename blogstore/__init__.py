"""blogstore: the files of a log on disk, for the writer and the reader.

``blog`` (the writer) and ``bread`` (the reader) both import this package, which is
internal to them (its errors are public as ``blog.errors``'s); it imports
``blogformat`` (the bytes of a file) and neither side. Modules, each pointed to by a
section of ``docs/format.md``:

- ``fileset``: the names of a rotated set's files, and the careful ways of making,
  locking and removing them (section 13);
- ``manifest``: the directory's manifest of closed files, with their time ranges
  (section 14);
- ``catalog``: the compaction catalog, which compacted file replaces which originals
  (section 14);
- ``crashlayout``: the crash buffer's files, where they live, the checks of their
  directory (section 15);
- ``bufferread``: reading a dead process's crash buffer;
- ``recoverytarget``: the log files recovery may write, and the write a kill tore;
- ``recovery``: the recovery procedure, appending what a buffer held to the log;
- ``posix``: the file locks (``fcntl``) that all of the above but reading need, and a
  plain file does not (where they are missing, as on Windows: ``NeedsPosix``);
- ``errors``: the errors of the files on disk (``UnsafeBufferDirectory``, ``NeedsPosix``).
"""
