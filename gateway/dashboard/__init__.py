"""The spend dashboard served at `/dashboard`: its routes, figures and built static assets."""

from gateway.dashboard.routes import router

__all__ = ["router"]
