"""Surviving upstream faults without multiplying load or charges: backoff, retry budget, circuit
breakers and idempotency keys. The executor composes them."""
