"""The Anthropic Messages API: ``/v1/messages`` (whole and streamed), token counting and models.

Owns Anthropic's own rules: content blocks, ``cache_control`` breakpoints and their cache,
thinking signatures, tool use, and its error bodies (``529 overloaded_error``).
"""
