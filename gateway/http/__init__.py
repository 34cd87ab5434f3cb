"""HTTP at the edge: the fast lane that skips FastAPI for the hot endpoints, the connection protocol's
guards against slow or hostile clients, request ids, security headers, and the streamed response."""
