"""HTTP routes: the OpenAI-compatible ingress (chat, messages, embeddings), their body parsing, the
settlement that closes every request, admin and spend APIs, model listing and health probes."""
