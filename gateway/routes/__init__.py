"""HTTP routes: the OpenAI-compatible ingress, model listing and health probes."""
