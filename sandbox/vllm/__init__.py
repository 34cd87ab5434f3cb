"""What only a vLLM server answers: ``/health``, ``/ping``, ``/version`` and Prometheus ``/metrics``.

Chat completions, models and embeddings on the ``vllm`` dialect are served by
``sandbox.openai`` in its vLLM flavour (the same objects with vLLM's fields).
"""
