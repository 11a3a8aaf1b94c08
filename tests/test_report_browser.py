"""The report page as a person sees it: Debian's Chromium renders it headless, driven by Selenium.

Selenium talks to Debian's `chromedriver` at /usr/bin/chromedriver (passed as the service path, so
Selenium Manager never tries to download a driver). The test takes screenshots through the
DevTools protocol and reads their pixels itself (a small PNG decoder below): every chart's plot
area must show its series' colors, a margin of the page must show none, and the browser must log
no console error (the page's Content-Security-Policy would log one for any fetch).

Skipped only when Chromium or its driver is not installed or cannot start (the reason is given);
`.ci/run` installs both. To refresh the picture in docs/reports.md:
`REPORT_SCREENSHOT=docs/report-screenshot.png python3 -m pytest tests/test_report_browser.py`.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import struct
import zlib
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from smart_search import report
from tests.conftest import REPO, other_apis

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--window-size=1060,1000",
)
WHITE = (255, 255, 255)


def hex_rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


# --- a month an operator might have ----------------------------------------------------------


def demo_logs(logs: Path) -> None:
    """Nov 2025, days 1-20, six agents: Gemini on course for ~3,000 of 5,000, Brave past 1,000."""
    rng = random.Random(14)
    logs.mkdir(parents=True)
    agents = ["stock-analysis", "tech-news", "space-watch", "general", "research", "digest"]
    weights = [30, 22, 14, 12, 12, 10]
    for day_index in range(20):
        day = date(2025, 11, 1) + timedelta(days=day_index)
        lines = []
        for _ in range(150 + rng.randrange(-20, 40)):
            agent = rng.choices(agents, weights)[0]
            moment = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(
                seconds=rng.randrange(86400)
            )
            roll = rng.random()
            record: dict[str, Any] = {
                "log_version": 2,
                "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                "agent_id": agent,
                "success": True,
                "fallback_used": False,
                "mode": "first",
            }
            lat = round(rng.lognormvariate(6.5, 0.4), 1)
            if roll < 0.60:
                record.update(provider_used="gemini", quota_source="agent_allocation", units=1,
                              attempts=[{"provider": "gemini", "outcome": "success",
                                         "latency_ms": lat, "units": 1,
                                         "quota_source": "agent_allocation"}])  # fmt: skip
            elif roll < 0.82:
                record.update(provider_used="brave", quota_source="shared_pool", units=1,
                              attempts=[{"provider": "brave", "outcome": "success",
                                         "latency_ms": lat, "units": 1,
                                         "quota_source": "shared_pool"}])  # fmt: skip
            elif roll < 0.90:
                record.update(provider_used="web_fetch", web_fetch_engine="duckduckgo", units=0,
                              fallback_used=True,
                              attempts=[{"provider": "gemini", "outcome": "failed",
                                         "latency_ms": lat, "units": 0},
                                        {"provider": "web_fetch", "engine": "duckduckgo",
                                         "outcome": "success", "latency_ms": lat / 2,
                                         "units": 0}])  # fmt: skip
            elif roll < 0.97:
                record.update(provider_used="gemini", cached=True, units=0, units_saved=1,
                              attempts=[{"provider": "cache", "outcome": "success",
                                         "latency_ms": 1.0, "units": 0}])  # fmt: skip
            else:
                record.update(provider_used=None, success=False, error_code="all_exhausted",
                              units=0,
                              attempts=[{"provider": "brave", "outcome": "skipped", "units": 0},
                                        {"provider": "web_fetch", "engine": "duckduckgo",
                                         "outcome": "failed", "latency_ms": lat,
                                         "units": 0}])  # fmt: skip
            record["latency_ms"] = lat + 3
            lines.append(json.dumps(record))
        (logs / f"search-{day.isoformat()}.jsonl").write_text("\n".join(lines) + "\n")


# --- reading a PNG ---------------------------------------------------------------------------


def decode_png(data: bytes) -> tuple[int, int, list[bytearray], int]:
    """(width, height, rows, bytes per pixel) of an 8-bit RGB/RGBA non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    width = height = bpp = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(line)
        prev = line
    return width, height, rows, bpp


def pixels(data: bytes) -> Iterator[tuple[int, int, int]]:
    width, _, rows, bpp = decode_png(data)
    for row in rows:
        for x in range(width):
            yield row[x * bpp], row[x * bpp + 1], row[x * bpp + 2]


def near(pixel: tuple[int, int, int], color: tuple[int, int, int], tolerance: int = 24) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, color, strict=True))


# --- the browser -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    for binary in (CHROMIUM, CHROMEDRIVER):
        if not os.access(binary, os.X_OK):
            pytest.skip(f"{binary} is not installed (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    except WebDriverException as exc:
        pytest.skip(f"Chromium could not start: {exc.msg or exc}"[:300])
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: Any, clip: dict[str, float] | None = None) -> bytes:
    params: dict[str, Any] = {"format": "png", "captureBeyondViewport": True}
    if clip:
        params["clip"] = {**clip, "scale": 1}
    return base64.b64decode(driver.execute_cdp_cmd("Page.captureScreenshot", params)["data"])


@pytest.fixture(scope="module")
def page(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("report-page")
    demo_logs(root / "logs")
    now = datetime(2025, 11, 20, 18, 0, tzinfo=UTC).timestamp()
    window = report.Window(date(2025, 11, 7), date(2025, 11, 20), now=now,
                           prices_per_1000={"gemini": 14.0, "brave": 5.0})  # fmt: skip
    doc = report.build_report(str(root / "logs"), window)
    path = root / "report.html"
    path.write_text(report.render_html(doc))
    browser.get_log("browser")  # start from an empty console
    browser.get(path.as_uri())
    return {"doc": doc, "path": path}


CHART_COLORS = {
    "units-by-provider": [report.COLORS["gemini"], report.COLORS["brave"]],
    "units-by-agent": list(report.AGENT_COLORS[:6]),
    "outcomes-by-tier": [report.COLORS[o] for o in ("success", "failed", "skipped")],
    "burn-gemini-2025-11": [report.COLORS["gemini"], report.COLORS["limit"]],
    "burn-brave-2025-11": [report.COLORS["brave"], report.COLORS["limit"]],
    # Tavily spent nothing in the page's month: its budget line alone.
    "burn-tavily-2025-11": [report.COLORS["limit"]],
}


def test_charts_are_drawn_in_their_colors(browser: Any, page: dict[str, Any]) -> None:
    ids = browser.execute_script(
        "return [...document.querySelectorAll('svg.chart')].map(s => s.id)"
    )
    # The other registered APIs, idle in these logs, have a burn chart each too (drawn, not
    # checked here: nothing of theirs is coloured).
    idle = [p for p in other_apis() if f"burn-{p}-2025-11" not in CHART_COLORS]
    idle_burns = [f"chart-burn-{p}-2025-11" for p in idle]
    assert ids == [f"chart-{key}" for key in CHART_COLORS] + idle_burns
    for key, colors in CHART_COLORS.items():
        box = browser.execute_script(
            # The geometry's box, widened by 4 px for the strokes drawn on its edges.
            "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
            "return {x: r.left + scrollX - 4, y: r.top + scrollY - 4, width: r.width + 8,"
            " height: r.height + 8}",
            f"#chart-{key} g.plot",
        )
        assert box["width"] > 100 and box["height"] > 40, (key, box)
        seen = list(pixels(screenshot(browser, box)))
        drawn = sum(1 for p in seen if not near(p, WHITE, 10))
        # A month with no use draws only its axes and budget line.
        least = 0.02 if colors == [report.COLORS["limit"]] else 0.05
        assert drawn > least * len(seen), (key, drawn, len(seen))
        for color in colors:
            rgb = hex_rgb(color)
            hits = sum(1 for p in seen if near(p, rgb))
            assert hits >= 20, f"{key}: {color} drawn on {hits} pixels"


def test_a_margin_of_the_page_is_blank(browser: Any, page: dict[str, Any]) -> None:
    """The pixel check can fail: the page's left padding holds nothing."""
    seen = list(pixels(screenshot(browser, {"x": 2, "y": 120, "width": 18, "height": 300})))
    assert seen and all(near(p, WHITE, 4) for p in seen)


def test_no_console_errors_and_no_fetches(browser: Any, page: dict[str, Any]) -> None:
    assert browser.title == "smart-search report 2025-11-07 to 2025-11-20"
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    # The tables the browser shows are the report's numbers.
    total = browser.execute_script(
        "return [...document.querySelectorAll('table[data-key=\"day-units\"] tr.total td')]"
        ".map(td => td.textContent)"
    )
    doc = page["doc"]
    assert total[0] == "total" and total[-1] == f"{doc['totals']['units_total']:,}"


def test_screenshot_of_the_charts(browser: Any, page: dict[str, Any], tmp_path: Path) -> None:
    box = browser.execute_script(
        "const r = document.querySelector('#charts').getBoundingClientRect();"
        "return {x: 0, y: 0, width: Math.ceil(r.right) + 24, height: Math.ceil(r.bottom) + 8}"
    )
    data = screenshot(browser, box)
    width, height, _, _ = decode_png(data)
    assert (width, height) == (box["width"], box["height"])
    shot = tmp_path / "report-screenshot.png"
    shot.write_bytes(data)
    target = os.environ.get("REPORT_SCREENSHOT")
    if target:
        shutil.copyfile(shot, REPO / target if not os.path.isabs(target) else target)


def test_docs_show_a_committed_screenshot() -> None:
    png = REPO / "docs" / "report-screenshot.png"
    # docs/reports.md shows it, by a path relative to itself.
    assert "](report-screenshot.png)" in (REPO / "docs" / "reports.md").read_text()
    data = png.read_bytes()
    width, height, _, _ = decode_png(data)
    assert width >= 800 and height >= 600 and len(data) < 400_000
