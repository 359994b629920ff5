"""The playground in a real headless Chromium (Debian's chromium and chromedriver, driven by
Selenium): the page loads the databases with the bearer token typed into it, a question is
asked through the form, and the answer's SQL, its rows, the vote groups and the candidate
table appear. A screenshot of the answered page is written to OUT.

Usage: python playground_check.py URL TOKEN OUT.png
"""

import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait

url, token, out = sys.argv[1], sys.argv[2], sys.argv[3]
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
    print(f"playground: answered {sql!r} with {len(rows)} candidates in {len(groups)} group(s); screenshot {out}")
finally:
    driver.quit()
