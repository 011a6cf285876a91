"""The page: one HTML file with the package's own script, style and the run's data inline.

Nothing is fetched from anywhere: the script and the style ship in the package
(``assets/``) and are written into the page, the data is a JSON block the script parses.
The data is untrusted (task ids, command output and patches come from sandboxes): it is
embedded with every ``<``, ``>`` and ``&`` escaped, so no string in it can close the block,
and the script only ever puts it into the page as text (``textContent``), never as markup;
the page's content security policy lets no script run but this one (named by its hash).
"""

from __future__ import annotations

import base64
import hashlib
import json
from importlib import resources
from typing import Any

__all__ = ["data_json", "render_page"]

_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _asset(name: str) -> str:
    assets = resources.files("sandbox_runtime.swe.view").joinpath("assets")
    return assets.joinpath(name).read_text("utf-8")


def data_json(data: Any) -> str:
    """The page's data as JSON that is safe inside a ``<script>`` block."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in _ESCAPES.items():
        text = text.replace(char, escaped)
    return text


def render_page(data: Any | None, *, title: str) -> str:
    """The whole page; ``data=None`` for the server, where the script fetches ``data.json``."""
    page = _asset("page.html")
    script = _asset("view.js")
    # Only this script may run, whatever the data holds: the policy names it by its hash.
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    block = "" if data is None else data_json(data)
    safe_title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return (
        page.replace("{{title}}", safe_title)
        .replace("{{style}}", _asset("view.css"))
        .replace("{{script_hash}}", f"sha256-{digest}")
        .replace("{{script}}", script)
        .replace("{{data}}", block)
    )
