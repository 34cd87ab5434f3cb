"""Offline work that produces what the gateway ships (never imported by it)."""
