"""``cancel_and_wait``: stop asyncio tasks an object owns, without swallowing its caller's
cancellation.

The usual idiom, ``task.cancel()`` then ``await task`` under
``suppress(CancelledError)``, cannot tell the task's own cancellation from its caller's:
a stop that is itself cancelled while it waits goes on as if nothing happened, and the
task that called it keeps running (a broker's metadata loop, say, then never ends).
Here the caller waits with ``asyncio.wait``, which lets the caller's cancellation
through, and only then looks at how each task ended.

Concurrency: call on the event loop that runs the tasks.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(*tasks: asyncio.Task[Any]) -> None:
    """Cancel ``tasks`` and wait until each has ended. A task's cancellation is what was
    asked for; the first task that failed instead has its exception raised."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled():
            task.result()
