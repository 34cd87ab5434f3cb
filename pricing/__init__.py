"""Money as integer nano-USD, per-model prices (LiteLLM's table plus config overrides), request cost."""
