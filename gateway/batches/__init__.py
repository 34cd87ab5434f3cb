"""The Batch API: OpenAI's `/v1/files` + `/v1/batches` and Anthropic's `/v1/messages/batches`, run on
the provider's own batch API or, for a self-hosted model, by the gateway in its fleet's idle capacity;
each item settled into the ledger at the batch price and against the team's budget."""
