"""OpenAI's Responses API spoken to clients over the chat pipeline: requests translated to chat,
chat answers and chunks rendered back as response objects and typed stream events."""

from providers.responses.output import output_of, skeleton, to_responses_usage
from providers.responses.request import InputError, new_id
from providers.responses.stream import ResponsesStreamEncoder, encode_events
from providers.responses.translate import Translated, check_create, from_responses_request

__all__ = [
    "InputError",
    "ResponsesStreamEncoder",
    "Translated",
    "check_create",
    "encode_events",
    "from_responses_request",
    "new_id",
    "output_of",
    "skeleton",
    "to_responses_usage",
]
