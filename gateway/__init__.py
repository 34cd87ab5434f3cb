"""Tollgate's service, one package per stage of a request:

http/ (edge: fast lane, guards, request id) -> routes/ (ingress handlers, request facts, settlement)
-> policy/ (keys, budgets, limits) -> caching/ (response cache) -> routing/ (which model)
-> execution/ (executor, retries, fleets, upstream adapters) -> accounting/ (cost, ledger rows)
with observability/ (metrics, traces), state/ (memory or Redis), config/, cli/ and dashboard/
beside them. `app` builds the ASGI app, `runtime` holds what a running gateway owns, `errors` is
the one error vocabulary, `models` the registry of public model names.
"""
