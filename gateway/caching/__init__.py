"""Answers Tollgate can give without calling upstream: the exact-match response cache (keys, storage,
replay), the optional semantic index over it, and the per-request lookup the handlers call."""
