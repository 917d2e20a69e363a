"""The web console end to end in a real headless Chromium (Debian's chromium and chromedriver,
bin/setup-browser; Selenium drives it): the overview lists a topic and a group with the right lag,
the topic page finds messages by key and by time, resetting a stopped group's offsets from its page
changes its lag, a name with HTML in it is shown as text, and a console with admin.token asks for
it before showing data. Each page is also taken at 1400x1000 and 420x900; with
GREGOR_CONSOLE_SCREENSHOTS=DIR the PNGs are kept there (docs/extensions.md's come from this run)."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from tests.kit.inprocess import InProcessBroker

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="Debian's chromium and chromium-driver are not installed (bash bin/setup-browser)")
TOKEN = "browser-token-0123456789"
EVIL = "<img src=x onerror=window.__owned=1>"  # a group id may hold any characters
WIDE, NARROW = (1400, 1000), (420, 900)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("console-browser") / "data", admin_port=0) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([NewTopic("orders", 2, 1, topic_configs={"tag.header": "region"})])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=b.bootstrap)
        b.sent = {}
        for i, (key, region) in enumerate((("alice", "eu"), ("bob", "us"), ("carol", "eu"), ("dave", "us"))):
            b.sent[key] = producer.send("orders", f'{{"order": {i}, "item": "book"}}'.encode(), key=key.encode(),
                                        partition=i % 2, headers=[("region", region.encode())]).get(timeout=30)
            time.sleep(0.01)
        producer.close()
        for group, offsets in (("billing", {0: 1, 1: 0}), (EVIL, {0: 2, 1: 2})):
            _commit(b, group, offsets)
        yield b


def _commit(broker, group: str, offsets: dict[int, int]) -> None:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    consumer.assign([TopicPartition("orders", p) for p in offsets])
    consumer.commit({TopicPartition("orders", p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    consumer.close()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={WIDE[0]},{WIDE[1]}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _open(browser, url: str, route: str, timeout: float = 20.0) -> None:
    browser.get(url)
    _loaded(browser, route, timeout)


def _loaded(browser, route: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if browser.execute_script("return document.body && document.body.dataset.loaded") == route:
            return
        time.sleep(0.1)
    error = browser.execute_script("var e = document.getElementById('error'); return e ? e.textContent : ''")
    raise AssertionError(f"page {route!r} not loaded in {timeout} s (error box: {error!r})")


def _rows(browser, table: str) -> list[list[str]]:
    from selenium.webdriver.common.by import By
    return [[cell.text for cell in row.find_elements(By.CSS_SELECTOR, "td")]
            for row in browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")]


def _shots(browser, name: str, tmp_path: Path) -> None:
    """The page at both sizes; kept in GREGOR_CONSOLE_SCREENSHOTS when set. The page must not need a
    horizontal scroll bar of its own at either width (tables scroll inside their box)."""
    keep = os.environ.get("GREGOR_CONSOLE_SCREENSHOTS")
    for label, (width, height) in (("wide", WIDE), ("narrow", NARROW)):
        browser.set_window_size(width, height)
        time.sleep(0.3)
        overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{name} at {width}px is {overflow}px wider than the window"
        target = Path(keep) if keep else tmp_path
        target.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(target / f"console-{name}-{label}.png"))
    browser.set_window_size(*WIDE)


def _traffic_for_the_charts(broker) -> None:
    """For the documentation's screenshots: 15 s of produce and fetch, so the rate charts have points."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    consumer = KafkaConsumer("orders", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        for _ in range(50):
            producer.send("orders", b'{"order": 0, "item": "pen"}', key=b"zoe", headers=[("region", b"eu")])
        producer.flush()
        consumer.poll(100)
    producer.close()
    consumer.close()


def test_the_overview_lists_the_topic_and_the_groups_with_their_lag(broker, browser, tmp_path):
    if os.environ.get("GREGOR_CONSOLE_SCREENSHOTS"):
        _traffic_for_the_charts(broker)
        return _shots_of_every_page(broker, browser)
    _open(browser, f"http://{broker.admin}/#/", "overview")
    topics = {row[0]: row for row in _rows(browser, "topics-table")}
    assert topics["orders"][1:3] == ["2", "4"]  # partitions, messages
    groups = {row[0]: row for row in _rows(browser, "groups-table")}
    assert groups["billing"][-1] == "3"  # (2 - 1) + (2 - 0)
    assert groups[EVIL][-1] == "0"  # the name is text, not an element
    assert browser.execute_script("return window.__owned === undefined")
    assert _rows(browser, "brokers-table")[0][0] == "0"
    _shots(browser, "overview", tmp_path)


def test_the_topic_page_finds_messages_by_key_and_by_time(broker, browser, tmp_path):
    from selenium.webdriver.common.by import By
    _open(browser, f"http://{broker.admin}/#/topics/orders?key=carol", "topic")
    rows = browser.find_elements(By.CSS_SELECTOR, "#messages-table tbody tr")
    assert [(r.get_attribute("data-partition"), r.get_attribute("data-offset")) for r in rows] == [("0", "1")]
    assert "carol" in rows[0].text and '"order": 2' in rows[0].text
    moment = datetime.fromtimestamp(broker.sent["carol"].timestamp / 1000, UTC).isoformat()
    _open(browser, f"http://{broker.admin}/#/topics/orders?from={quote(moment)}", "topic")
    rows = browser.find_elements(By.CSS_SELECTOR, "#messages-table tbody tr")
    assert [(r.get_attribute("data-partition"), r.get_attribute("data-offset")) for r in rows] == [
        ("0", "1"), ("1", "1")]  # carol, then dave
    assert {row[0] for row in _rows(browser, "partitions-table")} == {"0", "1"}
    _shots(browser, "topic", tmp_path)


def test_resetting_a_stopped_groups_offsets_from_its_page_changes_its_lag(broker, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    group = f"replay-{uuid.uuid4().hex[:6]}"
    _commit(broker, group, {0: 2, 1: 2})
    _open(browser, f"http://{broker.admin}/#/groups/{group}", "group")
    assert _group_lags(browser)[0] == "0"
    form = browser.find_element(By.ID, "reset-form")
    Select(form.find_element(By.NAME, "to")).select_by_value("earliest")
    browser.execute_script("document.body.dataset.loaded = ''")
    form.find_element(By.CSS_SELECTOR, "button[type=submit], input[type=submit]").click()
    _loaded(browser, "group")  # the page renders again after the reset
    deadline = time.monotonic() + 20
    while _group_lags(browser)[0] != "4" and time.monotonic() < deadline:
        time.sleep(0.2)
    total, lags, result = _group_lags(browser)
    assert (total, lags) == ("4", {"orders/0": "2", "orders/1": "2"})
    assert "0" in result and "2" in result  # the offsets moved, as the result table says
    _shots(browser, "group", tmp_path)


def _shots_of_every_page(broker, browser) -> None:
    """The documentation's screenshots (docs/extensions.md, *Web console*), after some traffic."""
    for name, route, url in (("overview", "overview", "#/"), ("topic", "topic", "#/topics/orders?key=alice"),
                             ("group", "group", "#/groups/billing")):
        _open(browser, f"http://{broker.admin}/{url}", route)
        _shots(browser, name, Path(os.environ["GREGOR_CONSOLE_SCREENSHOTS"]))


def _group_lags(browser) -> tuple[str, dict[str, str], str]:
    """(total lag, lag per topic/partition, the reset's result), read at once: the page re-renders."""
    return tuple(browser.execute_script("""
        const lags = {};
        for (const row of document.querySelectorAll('#lag-table tbody tr'))
            lags[row.dataset.topic + '/' + row.dataset.partition] = row.querySelector('.lag').textContent;
        const total = document.getElementById('group-total-lag');
        const result = document.getElementById('reset-result');
        return [total ? total.textContent : '', lags, result ? result.textContent : ''];"""))


def test_with_a_token_the_console_asks_for_it_and_a_post_without_it_is_refused(tmp_path_factory, browser):
    from selenium.webdriver.common.by import By
    with InProcessBroker(tmp_path_factory.mktemp("console-token") / "data", admin_port=0,
                         **{"admin.token": TOKEN}) as guarded:
        browser.get(f"http://{guarded.admin}/#/")
        deadline = time.monotonic() + 20
        while not browser.find_elements(By.CSS_SELECTOR, "#token-form input") and time.monotonic() < deadline:
            time.sleep(0.1)
        refused = browser.execute_script(
            "return fetch('/v1/topics/x/delete', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            " body: '{}'}).then(r => r.status)")
        assert refused == 401
        field = browser.find_element(By.CSS_SELECTOR, "#token-form input")
        field.send_keys(TOKEN)
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        _loaded(browser, "overview")
        assert browser.find_element(By.ID, "brokers-table")
        browser.execute_script("sessionStorage.clear()")
