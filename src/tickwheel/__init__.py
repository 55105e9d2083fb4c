"""tickwheel: Kafka's delayed-operation machinery in Python, and the broker built on it.

Layers, lowest first (a lower layer never imports a higher one):

- ``tickwheel.timer`` -- the hierarchical timing wheel (``SystemTimer``) and its drivers.
- ``tickwheel.purgatory`` -- ``DelayedOperation`` and ``DelayedOperationPurgatory``.
- ``tickwheel.log`` -- the segmented partition log.

``timer`` and ``purgatory`` need nothing outside the standard library.
"""

__version__ = "0.1.0"
