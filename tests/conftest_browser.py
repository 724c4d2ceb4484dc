"""Headless Chromium for tests, driven by selenium with the system chromedriver (no downloads).

Use in a test module:

    from conftest_browser import browser  # noqa: F401  (the fixture)

    def test_page(browser, tmp_path):
        page = tmp_path / "page.html"; page.write_text(...)
        browser.get(page.as_uri())
        ...
        assert not severe_console_errors(browser)

Needs the Debian packages `chromium` and `chromium-driver` (/usr/bin/chromium,
/usr/bin/chromedriver) and `pip install selenium`; the fixture skips, saying what is
missing, when they are not there. CHROMIUM / CHROMEDRIVER env vars override the paths.
"""
import os
import shutil
import subprocess

import pytest

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-extensions", "--disable-default-apps", "--no-first-run",
                  "--no-default-browser-check", "--mute-audio", "--window-size=1200,900")


def browser_missing_reason():
    """None if headless Chromium can be driven here, else why not (for pytest.skip)."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"{path} not found: apt-get install -y chromium chromium-driver (Debian package {package})"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install selenium (see requirements)"
    try:
        subprocess.run([CHROMEDRIVER, "--version"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as err:
        return f"{CHROMEDRIVER} does not run: {err}"
    return None


def start_browser(profile_dir):
    """A new headless Chromium WebDriver with a fresh profile in `profile_dir`; call .quit() after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile_dir}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # A Service with an explicit path: selenium skips Selenium Manager (no network).
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    return driver


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """Session-wide headless Chromium (selenium WebDriver); skipped when not installed."""
    reason = browser_missing_reason()
    if reason:
        pytest.skip(reason)
    driver = start_browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()


def severe_console_errors(driver):
    """Console messages of level SEVERE since the last call (JS errors, failed loads)."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def wait_until(driver, predicate, timeout=10, message="condition not met"):
    """Wait until predicate(driver) is truthy; returns its value (selenium WebDriverWait)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(predicate, message)
