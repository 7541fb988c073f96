"""The published site in a real browser: two quickstart-sized runs through the real runner
(real local services on 127.0.0.1, papermill, nbconvert), ``benchlib publish``, then Debian's
chromium (headless, as CI runs it: ``--no-sandbox``, ``--disable-background-networking``)
through chromium-driver opens the site from an HTTP server on 127.0.0.1 and from ``file://``,
follows every link from the index and checks each page: no console error, no request outside
the site, no broken link, every image and plot drawn with a non-zero size, the verdict tables,
and a history plot with one point per run. Screenshots of the index, the study page and a
report go to ``reports/browser-test/`` in the project."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urldefrag

import pytest

from benchlib.publish.execute import run_notebook
from benchlib.publish.notebooks import project_root
from benchlib.publish.site import build_site

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = [pytest.mark.notebook, pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                 reason="needs Debian's chromium and chromium-driver (scripts/setup.sh installs them)")]

RUNS = 2
SCREENSHOTS = project_root() / "reports" / "browser-test"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("site")
    for i in range(1, RUNS + 1):
        run = run_notebook("00_quickstart", {"trials": 2, "duration_s": 0.5, "warmup_s": 0.2, "connections": 4,
                                             "out_dir": str(tmp / "runs"), "run_id": f"browser{i}", "seed": i},
                           reports_dir=tmp / "reports")
        assert run.ok, run.error
    built = build_site(tmp / "reports", tmp / "site", runs_root=tmp / "runs")
    return built.out


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-background-networking", "--disable-gpu",
                "--disable-dev-shm-usage", "--window-size=1280,900", "--allow-file-access-from-files"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(DRIVER)), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def _requests(driver: WebDriver) -> list[str]:
    """Every URL the page requested since the last call (the performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def _local_file(url: str, base: str, site: Path) -> Path:
    return site / unquote(url[len(base):])


def _crawl(driver: WebDriver, base: str, site: Path) -> dict[str, dict[str, Any]]:
    """Open the index and every page linked from it (within the site), checking each; returns
    per page what the assertions below need."""
    seen: dict[str, dict[str, Any]] = {}
    todo = [base + "index.html"]
    _requests(driver)
    driver.get_log("browser")
    while todo:
        url = todo.pop(0)
        if url in seen:
            continue
        driver.get(url)
        page: dict[str, Any] = {"title": driver.title}
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors, f"{url}: console errors {errors}"
        requested = _requests(driver)
        assert url in requested, f"{url}: the request log misses the page itself: {requested}"  # the log works
        outside = [u for u in requested if not (u.startswith(base) or u.startswith("data:"))]
        assert not outside, f"{url}: requests outside the site {outside}"
        links = driver.execute_script("return [...document.querySelectorAll('a[href]')].map(a => a.href)")
        for link in links:
            target = urldefrag(link)[0]
            assert target.startswith(base), f"{url}: link leaves the site: {link}"
            assert _local_file(target, base, site).is_file(), f"{url}: broken link {link}"
            if target.endswith(".html") and target not in seen:
                todo.append(target)
        images = driver.execute_script(
            "return [...document.images].map(i => [i.currentSrc.slice(0, 40), i.complete, i.naturalWidth, i.naturalHeight])")
        for src, complete, w, h in images:
            assert complete and w > 0 and h > 0, f"{url}: image not loaded: {src}"
        page["images"] = len(images)
        page["svg_sizes"] = driver.execute_script(
            "return [...document.querySelectorAll('svg.history')]"
            ".map(s => s.getBoundingClientRect().width * s.getBoundingClientRect().height)")
        page["points"] = driver.execute_script(
            "return [...document.querySelectorAll('svg.history')].map(s => s.querySelectorAll('[data-run-id]').length)")
        page["verdict_tables"] = driver.execute_script(
            "return document.querySelectorAll('table.verdicts').length")
        page["text"] = driver.execute_script("return document.body.innerText")
        seen[url] = page
    return seen


def _check(pages: dict[str, dict[str, Any]], base: str) -> None:
    study = base + "00_quickstart/index.html"
    reports = [u for u in pages if u.startswith(base + "00_quickstart/browser")]
    assert set(pages) >= {base + "index.html", base + "runs.html", study}, sorted(pages)
    assert len(reports) == RUNS, sorted(pages)
    assert pages[base + "index.html"]["verdict_tables"] == 1 and pages[study]["verdict_tables"] == 1
    points = pages[study]["points"]
    assert points and all(n == RUNS for n in points), points
    assert all(a > 0 for a in pages[study]["svg_sizes"]), pages[study]["svg_sizes"]
    for r in reports:
        text = str(pages[r]["text"])
        assert "arm / baseline [95% CI]" in text, f"{r}: no verdict table"
        assert "rebuild this report from the stored trials" in text and "-p run_id browser" in text
        assert pages[r]["images"] >= 2, f"{r}: the plots and the per-trial time series"
    study_text = str(pages[study]["text"])
    assert "Latest run against the previous one" in study_text and "Not comparable" not in study_text
    assert "ratio" in study_text.split("Latest run against the previous one")[1][:4000], "no comparison table"
    runs_text = str(pages[base + "runs.html"]["text"])
    assert "browser1" in runs_text and "browser2" in runs_text


def test_the_site_over_http_follows_every_link_and_draws_every_plot(browser: WebDriver, served: str, site: Path) -> None:
    pages = _crawl(browser, served, site)
    _check(pages, served)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    report = sorted(u for u in pages if u.startswith(served + "00_quickstart/browser"))[-1]
    for name, url in (("index", served + "index.html"), ("study", served + "00_quickstart/index.html"),
                      ("report", report)):
        browser.get(url)
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(1280, min(int(height) + 100, 12000))
        assert browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
        browser.set_window_size(1280, 900)
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 0


def test_the_site_from_file_urls_works_the_same(browser: WebDriver, site: Path) -> None:
    base = site.resolve().as_uri() + "/"
    _check(_crawl(browser, base, site), base)


def test_no_published_page_or_kept_file_names_an_absolute_path(site: Path) -> None:
    reports = site.parent / "reports"
    for path in [*site.rglob("*.html"), *site.rglob("*.json"), *reports.rglob("*/*.ipynb"), *reports.rglob("*/*.html"),
                 *reports.rglob("*/run.json")]:
        text = path.read_text(encoding="utf-8")
        for needle in (str(site.parent), "/root/", "/home/", "/work/", "/tmp/"):
            assert needle not in text, f"{path.relative_to(site.parent)} names {needle}"


def test_the_checks_catch_a_page_that_loads_from_a_cdn(browser: WebDriver, tmp_path: Path) -> None:
    """What nbconvert's own lab template did (require.js from a CDN) fails the crawl."""
    (tmp_path / "index.html").write_text('<!doctype html><html><head><link rel="icon" href="data:,">'
                                          '<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js">'
                                          "</script></head><body>x</body></html>")
    base = tmp_path.resolve().as_uri() + "/"
    with pytest.raises(AssertionError, match="console errors|requests outside the site"):
        _crawl(browser, base, tmp_path)
