"""The broker's network door: what happens to bytes before a request reaches a handler.

``Listener`` owns the listening socket and its accept path (TLS handshakes, and the
connection quotas that decide whether a socket is taken at all); ``Connection`` reads
one client's frames, reserves their bytes in the broker's ``MemoryPool``
(``queued.max.request.bytes``), enforces the limits that hold before authentication,
hands each complete request to the ``Dispatcher`` and writes the answers in order. The
SASL and TLS glue (``SaslListener``, ``ListenerTls``) and the delayed close of a failed
login sit here too. Like Kafka's ``SocketServer``, ``ConnectionQuotas`` and
``MemoryPool``, these decide before a frame is dispatched; nothing here knows what a
request means beyond its header.

Concurrency: everything here lives on the broker's event loop; see each module.
"""
