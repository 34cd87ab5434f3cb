"""Accounting: the database engine and schema, the ledger row built for each request, its cost, the
batched writer with its spool, spend queries and retention."""
