"""Running a request upstream: the executor (fallback chain, retries with backoff, circuit breakers,
the retry budget, one deadline), idempotency keys, self-hosted fleets and their replica choice,
recent latencies, and the adapters built from config."""
