"""Configuration: the typed schema (`schema`, `self_hosted`, `base`), the YAML loader that reports the
path of a bad field, the embedded default, and live reload that keeps the old policy on a bad file."""
