"""What every dialect shares: the simulated model and the HTTP plumbing under it.

The model: ``engine`` (scheduling, prefill and decode timing), ``textgen`` (seeded text),
``tokens``, ``prefix_cache``, ``latency`` profiles, ``stats`` and ``embeddings``. The plumbing:
``asgi`` (one exchange), ``sse``, the ``dialect`` base class and ``errors``.
"""
