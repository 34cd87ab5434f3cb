"""Alembic environment and versions for the ledger schema (SQLite and PostgreSQL)."""
