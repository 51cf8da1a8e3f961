"""Where the browser test's Chromium and chromedriver are, and what is missing if they are not."""

from __future__ import annotations

import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
INSTALL = "apt-get install -y chromium chromium-driver"


def requirements_missing() -> str | None:
    """Why the browser test cannot run here (None: it can)."""
    missing = [
        name
        for name, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER))
        if path is None
    ]
    return f"missing {', '.join(missing)} ({INSTALL})" if missing else None
