"""Shared state between gateway replicas behind one interface: in-process memory or Redis."""

from gateway.state.store import BucketResult, StateStore

__all__ = ["BucketResult", "StateStore"]
