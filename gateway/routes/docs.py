"""`/docs` (Swagger UI) and `/redoc`, with their scripts and styles served by the gateway itself:
FastAPI's defaults load them from a CDN, which leaves both pages blank on a host without internet.
The bundles are fastapi-offline's (MIT; Swagger UI is Apache-2.0, ReDoc MIT)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, Request, Response
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse

from gateway.errors import error_body

ASSETS = Path(str(files("fastapi_offline") / "static"))
ASSET_PREFIX = "/docs/assets"
# Only these, by name: the URL never reaches the file system with a caller's path.
ASSET_TYPES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
OAUTH2_REDIRECT = "/docs/oauth2-redirect"

router = APIRouter()


@router.get("/docs", include_in_schema=False)
async def swagger_ui(request: Request) -> Response:
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - Swagger UI",
        oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT}",
        swagger_js_url=f"{root}{ASSET_PREFIX}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSET_PREFIX}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSET_PREFIX}/favicon.png",
    )


@router.get(OAUTH2_REDIRECT, include_in_schema=False)
async def swagger_ui_oauth2_redirect() -> Response:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc", include_in_schema=False)
async def redoc(request: Request) -> Response:
    root = request.scope.get("root_path", "")
    return get_redoc_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{root}{ASSET_PREFIX}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{ASSET_PREFIX}/favicon.png",
        with_google_fonts=False,  # fonts from Google are a CDN too; the page falls back to system fonts
    )


@router.get(ASSET_PREFIX + "/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    media_type = ASSET_TYPES.get(name)
    if media_type is None:
        body = error_body("no such asset", type="invalid_request_error", code="not_found")
        return Response(body, status_code=404, media_type="application/json")
    # no-cache: revalidated by its ETag, so an upgraded bundle is picked up at once.
    return FileResponse(ASSETS / name, media_type=media_type, headers={"cache-control": "no-cache"})
