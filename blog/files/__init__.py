"""The writer's files: rotated file sets and when they switch, their housekeeping
(compression, retention, the manifest), the crash buffer, and durable flushes (fsync).
Internal: the public names (``RotatingFile``, ``Compaction``) are ``blog``'s."""
