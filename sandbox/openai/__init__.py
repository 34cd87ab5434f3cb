"""The OpenAI wire format: ``/v1/chat/completions``, ``/v1/models`` and ``/v1/embeddings``.

Serves both the ``openai`` and the ``vllm`` dialect. vLLM speaks the same format with
field-level differences (``stop_reason``, ``tool_calls: []``, no ``system_fingerprint``, its
error body, its ids); each writer here keeps both shapes side by side behind one ``vllm``
flag, so a reader sees how they differ. What only vLLM serves lives in ``sandbox.vllm``.
"""
