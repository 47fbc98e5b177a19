"""Ways into the pipeline beside a logger call: ``@blog.event``, ``@blog.traced``,
``blog.adapt`` and the live text of ``blog.TextStream``. Internal: those names are
``blog``'s. (The ``logging`` bridge, test helpers and context fields are public modules of
their own: ``blog.stdlib``, ``blog.testing``, ``blog.contextfields``.)"""
