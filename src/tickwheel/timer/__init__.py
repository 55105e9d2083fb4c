"""tickwheel.timer: Apache Kafka's hierarchical timing wheel, in Python (stdlib only).

The parts are Kafka's (``server-common/.../server/util/timer``), one concept per module:

- ``TimerTask`` -- what runs at expiry (``run``), with ``delay_ms`` and O(1) ``cancel()``.
- ``TimerTaskEntry`` -- a task's place in one bucket, at an absolute ``expiration_ms``.
- ``TimerTaskList`` -- a bucket: entries, a shared ``TaskCounter``, an expiration.
- ``TimingWheel`` -- one level of buckets, with a lazily created overflow wheel.
- ``BucketQueue`` -- the heap of buckets (Kafka's ``DelayQueue``) that moves the clock.
- ``SystemTimer`` -- all of the above behind ``add``/``schedule``/``advance_clock``.
- ``Clock`` (``SystemClock``, ``ManualClock``) and ``Executor`` (``ThreadExecutor``,
  ``InlineExecutor``): injected time and where expired tasks run.
- Drivers: ``TimerReaper`` (Kafka's reaper thread) and ``AsyncioTimerDriver`` (one
  ``loop.call_at`` armed for the earliest bucket).
- ``LoopTimers`` -- the timers of one component on an event loop: each driven by an
  ``AsyncioTimerDriver``, or, on a ``ManualClock``, by the clock's ``advance`` (every
  timer of a broker moves at once); ``Scheduler`` -- Kafka's ``KafkaScheduler``,
  named periodic tasks on one of those timers.
- ``RoundWheelTimer`` -- seed 000's single-level wheel with round counts (Netty's
  ``HashedWheelTimer``), kept to be measured against the hierarchical wheel.

Levels for ``tick_ms=1, wheel_size=20`` (Kafka's defaults): a task ``d`` ms ahead sits in
the lowest level whose range exceeds ``d``, and drops one level each time its bucket
expires, so it runs within one 1 ms tick of its expiration::

    level  granularity (tick_ms)   range (interval_ms)
    0      1 ms                    20 ms
    1      20 ms                   400 ms
    2      400 ms                  8 s
    3      8 s                     160 s
    4      160 s                   53.3 min
    5      53.3 min                17.8 h
    6      17.8 h                  14.8 days

Python is not Java: three choices differ from Kafka's code (never from its behaviour),
each the faster one on CPython (the measurements are in docs/benchmarks.md, "Timer"):

- A bucket keeps its entries in a ``set`` instead of Kafka's hand-linked circular list:
  add, remove and move stay O(1), and entries of a bucket share one expiration, so
  flush order carries no meaning. Interpreted, a set is one C call where a linked list
  is several attribute stores and a flush that relinks node by node. Compiled, where
  attribute stores are native, the bucket is an array of entries that know their index
  (append; remove by moving the last entry into the hole): the compiled build's
  ``_task_list`` is built from ``_task_list_array.py``, the same API over that storage
  (``tickwheel.timer._build.TWIN_SOURCES``).
- One re-entrant lock per timer instead of a read-write lock plus per-bucket and
  per-entry monitors: under the GIL adds cannot run in parallel anyway, and an
  uncontended C-level lock taken once per add and once per cancel costs a fraction of
  any Python read-write lock. On the hot path it is taken with ``acquire()`` and
  released in ``try``/``finally`` (cheaper than ``with``, which binds and calls
  ``__enter__``/``__exit__``), and calls go through ``self._clock.now_ms()`` rather
  than bound methods kept in attributes, which CPython 3.11 cannot specialize.
- The cyclic garbage collector: a task and its entry point at each other, so the timer
  unbinds a task when it runs or is cancelled -- they are then freed by reference
  counting, never left as cyclic garbage. The collector still traverses every live
  timer (about half of the cost of ``add`` with a million pending, for asyncio's timers
  too); programs that hold millions of timers may ``gc.freeze()`` after start-up or
  raise ``gc.set_threshold``, a choice the library leaves to them.

Two builds of the same modules. The hot path (``add``, ``TimingWheel.add``,
``TimerTask.cancel``, ``advance_clock``) is plain typed Python -- slotted classes, no
``getattr``, no dynamic dispatch beyond the injected clock and executor -- and mypyc
compiles it. An install with a C compiler builds the *compiled twins* of this package's
modules and the purgatory's (``tickwheel.timer._mypyc._task`` for ``_task.py``, and so
on: ``hatch_build.py`` at the project's root); without one, or if that build fails, the
install goes on with the pure-Python modules alone. The twins have names of their own
because an extension module beside a ``.py`` of the same name always wins at import:
under other names both builds stay importable side by side, and this ``__init__``
imports the public names from one of them, chosen once by ``tickwheel.timer._build``:
the twins unless ``TICKWHEEL_PURE_PYTHON=1`` is set, they are missing, or they were
built from other sources than those present (a stale in-place build). ``BUILD`` names
the choice (``tickwheel --version`` prints it); ``COMPILED`` says whether it is the
compiled one. The purgatory follows the timer's choice. A class of one build is not a
class of the other: take every name from the public packages, never a private module.

What the compiler changes, besides running the same code faster: classes that
interpreted code subclasses (``TimerTask``, ``SystemTimer``, ``SystemClock``, and the
purgatory's ``DelayedOperation``) are marked ``mypyc_attr(allow_interpreted_subclasses=
True)``; the others cannot be subclassed outside the compiled modules, and their
instances take no attributes but their own. ``TimerTaskEntry`` is ``acyclic``: its
instances are not tracked by the cyclic GC, which is most of the GC's work with a
million timers pending (so ``close()``, or ``__del__`` for a timer dropped unclosed,
unbinds the pending tasks: an entry and its task point at each other, and an untracked
cycle would outlive the timer). Abstract methods
are not enforced on compiled classes (``DelayedOperation`` can be instantiated).

Concurrency: ``SystemTimer.add``, ``schedule``, ``TimerTask.cancel`` and ``size`` are safe
from any thread; ``advance_clock`` is called by one driver. Expired tasks run on the
executor, never while the timer's lock is held.
"""

from typing import TYPE_CHECKING

from tickwheel.timer._build import BUILD, COMPILED

if TYPE_CHECKING or not COMPILED:
    from tickwheel.timer._asyncio_driver import AsyncioTimerDriver
    from tickwheel.timer._bucket_queue import BucketQueue
    from tickwheel.timer._clock import Clock, ClockListener, ManualClock, SystemClock
    from tickwheel.timer._executor import Executor, InlineExecutor, ThreadExecutor
    from tickwheel.timer._loop_timers import LoopTimers
    from tickwheel.timer._reaper import TimerReaper
    from tickwheel.timer._round_wheel import RoundWheelTimer
    from tickwheel.timer._scheduler import Scheduler
    from tickwheel.timer._system_timer import Driver, SystemTimer, WakeupListener
    from tickwheel.timer._task import CallbackTask, TimerTask
    from tickwheel.timer._task_list import TaskCounter, TimerTaskEntry, TimerTaskList
    from tickwheel.timer._wheel import TimingWheel
else:
    from tickwheel.timer._mypyc._asyncio_driver import AsyncioTimerDriver
    from tickwheel.timer._mypyc._bucket_queue import BucketQueue
    from tickwheel.timer._mypyc._clock import Clock, ClockListener, ManualClock, SystemClock
    from tickwheel.timer._mypyc._executor import Executor, InlineExecutor, ThreadExecutor
    from tickwheel.timer._mypyc._loop_timers import LoopTimers
    from tickwheel.timer._mypyc._reaper import TimerReaper
    from tickwheel.timer._mypyc._round_wheel import RoundWheelTimer
    from tickwheel.timer._mypyc._scheduler import Scheduler
    from tickwheel.timer._mypyc._system_timer import Driver, SystemTimer, WakeupListener
    from tickwheel.timer._mypyc._task import CallbackTask, TimerTask
    from tickwheel.timer._mypyc._task_list import TaskCounter, TimerTaskEntry, TimerTaskList
    from tickwheel.timer._mypyc._wheel import TimingWheel

__all__ = [
    "BUILD",
    "COMPILED",
    "AsyncioTimerDriver",
    "BucketQueue",
    "CallbackTask",
    "Clock",
    "ClockListener",
    "Driver",
    "Executor",
    "InlineExecutor",
    "LoopTimers",
    "ManualClock",
    "RoundWheelTimer",
    "Scheduler",
    "SystemClock",
    "SystemTimer",
    "TaskCounter",
    "ThreadExecutor",
    "TimerReaper",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "WakeupListener",
]
