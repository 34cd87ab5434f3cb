"""Tollgate's benchmark suite: the gateway against the sandbox upstream, side by side, in one run.

`python -m benchmarks` (or `make bench`) starts the sandbox and the gateway as pinned subprocesses,
drives both with a lean keep-alive HTTP/1.1 client and prints what the gateway adds (latency,
time to first token, large-prompt cost), what it sustains (req/s at c=64, with the ledger on
SQLite and on PostgreSQL), and what it costs (RSS, start-up, CPU per request). It is a report,
never a timed test: the machine is shared and noisy, so nothing here belongs in pytest.
"""
