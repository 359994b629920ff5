"""The playground in a real headless Chromium (Debian's chromium and chromedriver, driven by
Selenium): the page loads the databases with the bearer token typed into it, a question is
asked through the form, and the answer's SQL, its rows, the vote groups and the candidate
table appear; the question is in the history; the SQL is edited and run again (a grouping,
whose rows, chart bars and CSV are checked against the SQLite file itself; a 36-row cross
join, paged; a DELETE, refused with the file unchanged). Screenshots of the answered page and
of the chart are written to OUT and OUT with `-chart` before its suffix.

Usage: python playground_check.py URL TOKEN OUT.png DATABASE_FILE
"""

import hashlib
import sqlite3
import sys
import urllib.parse

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait

url, token, out, database = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
GROUPED = "SELECT country, count(*) AS singers FROM singer GROUP BY country ORDER BY country"


def digest(path: str) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def run_edited(driver, wait, sql: str) -> str:
    """Types `sql` into the editor, runs it, and returns the run's status line."""
    editor = driver.find_element(By.ID, "sql-editor")
    editor.clear()
    editor.send_keys(sql)
    driver.find_element(By.ID, "run-sql").click()
    wait.until(lambda d: d.find_element(By.ID, "run-status").text not in ("", "running…"))
    return driver.find_element(By.ID, "run-status").text

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--window-size=1400,1300"]:
    options.add_argument(flag)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
try:
    driver.get(url)
    wait = WebDriverWait(driver, 240)
    token_box = driver.find_element(By.ID, "token")
    token_box.send_keys(token)
    driver.execute_script("arguments[0].dispatchEvent(new Event('change'))", token_box)
    wait.until(lambda d: any(o.get_attribute("value") == "concert_singer"
                             for o in d.find_elements(By.CSS_SELECTOR, "#database option")))
    Select(driver.find_element(By.ID, "database")).select_by_value("concert_singer")
    wait.until(lambda d: "singer" in d.find_element(By.ID, "schema").text)
    driver.find_element(By.ID, "question").send_keys("How many singers do we have?")
    driver.find_element(By.ID, "ask-button").click()
    wait.until(lambda d: d.find_element(By.ID, "status").text in ("answered",) or
               "error" in (d.find_element(By.ID, "status").get_attribute("class") or ""))
    status = driver.find_element(By.ID, "status").text
    assert status == "answered", status
    sql = driver.find_element(By.ID, "answer-sql").text
    assert "count" in sql.lower(), sql
    cells = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#rows tbody td")]
    assert cells == ["6"], cells
    rows = driver.find_elements(By.CSS_SELECTOR, "#candidates tbody tr")
    assert len(rows) >= 2, len(rows)
    generators = {r.find_elements(By.TAG_NAME, "td")[2].text for r in rows}
    assert "qwen-rep" in generators, generators
    assert driver.find_elements(By.CSS_SELECTOR, "#candidates tbody tr.chosen"), "no chosen candidate"
    groups = driver.find_elements(By.CSS_SELECTOR, "#groups .group")
    assert groups and any("chosen" in g.text for g in groups), [g.text for g in groups]
    why = driver.find_element(By.ID, "why").text
    assert "wins" in why or "answer" in why, why
    ec.visibility_of_element_located((By.ID, "timings"))
    driver.save_screenshot(out)
    history = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#history li")]
    assert any("How many singers do we have?" in h for h in history), history

    # Edit the answer's SQL and run it again: a grouping, checked against the file itself.
    driver.find_element(By.ID, "edit-sql").click()
    status = run_edited(driver, wait, GROUPED)
    expected = sqlite3.connect(f"file:{database}?mode=ro", uri=True).execute(GROUPED).fetchall()
    assert status == f"ran: {len(expected)} rows", status
    table = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
             for tr in driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]
    assert table == [[c, str(n)] for c, n in expected], table
    href = driver.find_element(By.ID, "csv-link").get_attribute("href")
    csv = urllib.parse.unquote(href.split(",", 1)[1])
    # The header is the columns as the database names them (SQLite: `Country`, as declared).
    header, body = csv.split("\r\n", 1)
    assert header.lower() == "country,singers", header
    assert body == "".join(f"{c},{n}\r\n" for c, n in expected), csv
    driver.find_element(By.ID, "show-chart").click()
    assert not driver.find_element(By.ID, "pager").is_displayed(), "a pager for one page"
    chart = driver.find_element(By.CSS_SELECTOR, "#chart svg")
    assert chart.get_attribute("data-kind") == "bar", chart.get_attribute("data-kind")
    bars = driver.find_elements(By.CSS_SELECTOR, "#chart rect.bar")
    assert len(bars) == len(expected), len(bars)
    heights = [float(b.get_attribute("height")) for b in bars]
    tallest = max(range(len(expected)), key=lambda i: expected[i][1])
    assert heights.index(max(heights)) == tallest, heights
    chart_out = out.rsplit(".", 1)[0] + "-chart." + out.rsplit(".", 1)[1]
    driver.save_screenshot(chart_out)
    driver.find_element(By.ID, "show-table").click()

    # More rows than a page: 36 pairs of singers, 10 a page, within the server's preview.
    status = run_edited(driver, wait, "SELECT a.name, b.name FROM singer AS a, singer AS b")
    assert status == "ran: 36 rows", status
    label = driver.find_element(By.ID, "page-label").text
    assert label.startswith("page 1 of "), label
    assert len(driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")) == 10
    driver.find_element(By.ID, "page-next").click()
    assert driver.find_element(By.ID, "page-label").text.startswith("page 2 of ")

    # A write through the editor is refused, and the file is as it was.
    before = digest(database)
    status = run_edited(driver, wait, "DELETE FROM singer")
    assert "error" in driver.find_element(By.ID, "run-status").get_attribute("class"), status
    assert digest(database) == before, "the database changed"
    print(f"playground: answered {sql!r} with {len(rows)} candidates in {len(groups)} group(s); "
          f"edited and ran {len(expected)} rows, {len(bars)} bars, CSV and pages as the file has them; "
          f"a DELETE refused ({status}); screenshots {out}, {chart_out}")
finally:
    driver.quit()
