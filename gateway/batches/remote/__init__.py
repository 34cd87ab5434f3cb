"""Adapters to the providers' own Batch APIs (see `types.py` for the contract the runner uses)."""
