"""Google's Gemini API: the adapter that calls it and the pure translators it uses."""

from providers.gemini.client import GeminiAdapter
from providers.gemini.embeddings import from_gemini_embeddings, to_gemini_embeddings_request
from providers.gemini.stream import GeminiStreamDecoder
from providers.gemini.translate import from_gemini_response, from_gemini_usage, to_gemini_request

__all__ = [
    "GeminiAdapter",
    "GeminiStreamDecoder",
    "from_gemini_embeddings",
    "from_gemini_response",
    "from_gemini_usage",
    "to_gemini_embeddings_request",
    "to_gemini_request",
]
