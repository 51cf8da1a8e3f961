"""Exit statuses of the ``brokerless`` command besides 0 (done), 1 (error) and 2 (usage)."""

#: Ctrl-C stopped it (128 + SIGINT, as a shell reports a program that SIGINT ended).
INTERRUPTED = 130
#: The reader of its output went away, e.g. ``| head`` (128 + SIGPIPE).
BROKEN_PIPE = 141
#: SIGTERM stopped it (``kill``, ``timeout``, ``docker stop``): 128 + SIGTERM.
TERMINATED = 143
