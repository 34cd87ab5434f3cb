"""Accounting: the ledger schema, the row built for each request, and the batched writer."""
