"""The log cleaner's worker process: ``python -m tickwheel.log._cleaner_worker``.

A ``LogCleaner`` thread starts one per cleaning and writes the pickled
``CleaningJob`` to its stdin; the worker reads, maps and writes the cleaned segments
(``write_cleaned``) and writes the pickled result, or the exception it raised, to its
stdout, then exits. See ``_cleaner`` for why the work runs in its own process.

Concurrency: one job per process; the process shares nothing with the broker but the
segment files it reads and the ``.cleaned`` files it writes.
"""

from __future__ import annotations

import sys

from tickwheel.log._cleaner import run_worker

if __name__ == "__main__":
    run_worker(sys.stdin.buffer, sys.stdout.buffer)
