"""A screenshot of each dashboard view is checked in under docs/dashboard/ and kept current.

`UPDATE_SCREENSHOTS=1` retakes them and records the digest of the built assets they show; any
other run retakes them into a temporary directory (so every view must still render) and fails when
the checked-in ones were taken from another build than the committed assets. Pixels are never
compared: fonts and timings differ between machines, the build does not.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

from gateway.dashboard.routes import ASSETS
from tests.browser.conftest import ADMIN, open_dashboard

DOCS = Path(__file__).resolve().parents[2] / "docs" / "dashboard"
MANIFEST = DOCS / "screenshots.json"
VIEWS = ("overview", "tables", "latency", "errors", "requests")
WIDTH = 1440


def assets_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(ASSETS.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def take(page: Any, view: str, path: Path) -> None:
    page.click(f"#tabs button[data-view='{view}']")
    page.wait_for_selector(f"body[data-view='{view}'][data-state='ready']", timeout=15_000)
    if view == "requests":
        # The explorer with one request opened: its route, attempts, cost split and latency.
        page.click("#grid-requests tbody tr:has-text('team-gamma') >> nth=0")
        page.wait_for_selector("#request-detail[data-id]")
    # The whole page in one viewport: a full-page capture repeats the sticky header mid-page.
    height = page.evaluate("() => document.documentElement.scrollHeight")
    page.set_viewport_size({"width": WIDTH, "height": height})
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": WIDTH, "height": 900})


def test_each_view_has_a_current_screenshot(traffic: dict[str, Any], browser: Any, tmp_path: Path) -> None:
    update = os.environ.get("UPDATE_SCREENSHOTS") == "1"
    out = DOCS if update else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    page = open_dashboard(browser, traffic["server"].base_url, ADMIN)
    try:
        for view in VIEWS:
            take(page, view, out / f"{view}.png")
        assert page.errors == []
    finally:
        page.close()
    taken = {view: png_size((out / f"{view}.png").read_bytes()) for view in VIEWS}
    assert all(width == WIDTH and height > 600 for width, height in taken.values()), taken
    if update:
        manifest = {
            "assets_sha256": assets_digest(),
            "views": {
                view: {"file": f"{view}.png", "width": w, "height": h} for view, (w, h) in taken.items()
            },
        }
        MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")
    recorded = json.loads(MANIFEST.read_text())
    assert recorded["assets_sha256"] == assets_digest(), (
        "docs/dashboard/*.png show another build of the dashboard: retake them with "
        "UPDATE_SCREENSHOTS=1 pytest tests/browser/test_dashboard_screenshots.py"
    )
    for view in VIEWS:
        entry = recorded["views"][view]
        assert png_size((DOCS / entry["file"]).read_bytes()) == (entry["width"], entry["height"]), view
        assert entry["width"] == WIDTH, view
