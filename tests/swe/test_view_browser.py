"""``sandbox-runtime view`` pages in a real browser: Debian's headless chromium.

Each page is opened from disk (``file://``, no server, no network), must log no console
warning or error, and is driven as a person would: filters, the keyboard, a transcript, the
timeline, a group, two runs compared, training plots, and a 10,000-task run timed.  The
screenshots of the main views are written to ``build/test-artifacts/view/`` (or
``$VIEW_SCREENSHOTS``), which the tests print; ``docs/view/`` holds the committed ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.swe.browser import chromium, console_problems
from tests.swe.view_runs import HOSTILE, before_run, large_run, mixed_run

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a 10,000-task page may take to open, and a filter to redraw (docs/performance.md).
LARGE_OPEN_BUDGET = 4.0
LARGE_FILTER_BUDGET = 1.0


def view(*arguments: str | Path) -> None:
    """Run ``sandbox-runtime view`` as a user does."""
    command = [sys.executable, "-m", "sandbox_runtime.cli", "view", *map(str, arguments)]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)


#: Where the screenshots go unless ``VIEW_SCREENSHOTS`` names a directory (``build/`` is ignored
#: by git; CI keeps it as the run's artefacts).
SHOTS = ROOT / "build" / "test-artifacts" / "view"


@pytest.fixture(scope="module")
def shots() -> Path:
    """The screenshots' directory, printed (``-s`` shows it; the path is fixed either way)."""
    where = Path(os.environ.get("VIEW_SCREENSHOTS") or SHOTS)
    where.mkdir(parents=True, exist_ok=True)
    print(f"\nview screenshots: {where}")
    return where


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One chromium per test module (and xdist worker): a start costs seconds on a loaded host;
    each test opens its own page, and :func:`load` drops the console log of the one before."""
    with chromium(tmp_path_factory.mktemp("profile")) as session:
        yield session


def load(session: Any, page: Path) -> None:
    """Open ``page`` from disk and wait until the script drew it."""
    from selenium.webdriver.support.ui import WebDriverWait

    console_problems(session)  # what an earlier page logged is not this page's
    session.get(page.as_uri())
    WebDriverWait(session, 60).until(
        lambda s: s.execute_script("return document.body.dataset.ready === 'true'")
    )


def choose(session: Any, select_id: str, value: str) -> str:
    """Pick ``value`` in a filter; returns the count line."""
    from selenium.webdriver.support.ui import Select

    Select(session.find_element("id", select_id)).select_by_value(value)
    return str(session.find_element("id", "count").text)


def click(session: Any, element: Any) -> None:
    """Click ``element`` as a person would, after scrolling it to the middle of the window."""
    session.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def test_run_page_filters_keyboard_transcript_timeline(
    browser: Any, tmp_path: Path, shots: Path
) -> None:
    from selenium.webdriver.common.keys import Keys

    report = mixed_run(tmp_path)
    page = tmp_path / "report.html"
    view(report, "--html", page)
    load(browser, page)
    assert console_problems(browser) == []
    assert browser.find_element("id", "count").text == "7 of 7 tasks"
    browser.save_screenshot(str(shots / "view-summary-table.png"))

    assert choose(browser, "f-outcome", "error").startswith("2 of 7")
    assert choose(browser, "f-cause", "infrastructure").startswith("1 of 7")
    rows = browser.find_elements("css selector", "#rows tr")
    assert [row.get_attribute("data-key") for row in rows] == ["pkg__infra-3"]
    choose(browser, "f-outcome", "")
    choose(browser, "f-cause", "")
    assert choose(browser, "f-flag", "flagged").startswith("1 of 7")
    choose(browser, "f-flag", "")
    browser.find_element("id", "f-search").send_keys("group")
    assert browser.find_element("id", "count").text.startswith("2 of 7")
    browser.find_element("id", "f-search").send_keys(Keys.BACKSPACE * len("group"))
    assert browser.find_element("id", "count").text == "7 of 7 tasks"

    # The keyboard alone: into the table, two rows down, open, close.
    first = browser.find_element("css selector", "#rows tr")
    first.send_keys(Keys.ARROW_DOWN)
    browser.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    assert browser.find_element("id", "detail-h").text == "pkg__infra-3"
    assert "SandboxStartError" in browser.find_element("id", "detail").text
    attempts = browser.find_elements("css selector", "#detail .attempts li")
    assert [a.text for a in attempts] == [
        "error: SandboxGoneError: gone",
        "error: SandboxStartError",
    ]
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)
    assert not browser.find_elements("id", "detail")
    assert browser.switch_to.active_element.get_attribute("data-key") == "pkg__infra-3"

    # A transcript, its long parts collapsed, the patch as a coloured diff, the timeline.
    click(browser, browser.find_element("css selector", "#rows tr[data-key='pkg__resolved-1']"))
    detail = browser.find_element("id", "detail")
    assert "grep -n split pkg/core.py" in detail.text
    assert detail.find_elements("css selector", ".diff .add")
    assert detail.find_elements("css selector", ".diff .del")
    phases = detail.find_elements("css selector", "#timeline rect.phase")
    assert [p.get_attribute("class").split()[1] for p in phases] == [
        "start", "setup", "agent", "grading", "close"
    ]  # fmt: skip
    assert len(detail.find_elements("css selector", "#timeline rect.command")) == 2
    assert "FAIL_TO_PASS" in detail.text
    assert "PASS_TO_PASS" in detail.text
    browser.execute_script("arguments[0].scrollIntoView()", detail)
    browser.save_screenshot(str(shots / "view-transcript.png"))

    # A group's rollouts side by side.
    click(browser, browser.find_element("css selector", "#rows tr[data-key='pkg__group-6#1']"))
    cards = browser.find_elements("css selector", "#detail .rollouts article")
    assert [c.find_element("tag name", "h4").text for c in cards] == ["rollout 0", "rollout 1"]
    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element("id", "detail"))
    browser.save_screenshot(str(shots / "view-group.png"))
    assert console_problems(browser) == []


def test_untrusted_text_is_shown_never_run(browser: Any, tmp_path: Path, shots: Path) -> None:
    report = mixed_run(tmp_path)
    page = tmp_path / "report.html"
    view(report, "--html", page)
    load(browser, page)
    row = browser.find_element("css selector", "#rows tr:nth-child(5)")
    assert HOSTILE in row.text
    click(browser, row)
    detail = browser.find_element("id", "detail")
    assert HOSTILE in detail.text  # the output, as text a person can read and copy
    assert browser.title.startswith("sandbox-runtime")  # no script of the data ran
    assert not browser.find_elements("css selector", "img")  # no markup of the data made it
    browser.execute_script("arguments[0].scrollIntoView()", detail)
    browser.save_screenshot(str(shots / "view-flagged.png"))
    assert "test file" in detail.find_element("css selector", ".part:has(ul)").text
    assert console_problems(browser) == []


def test_two_runs_compared(browser: Any, tmp_path: Path, shots: Path) -> None:
    before, after = before_run(tmp_path), mixed_run(tmp_path)
    page = tmp_path / "compare.html"
    view(before, after, "--html", page)
    load(browser, page)
    rows = {
        row.find_element("css selector", "td").text: row.text
        for row in browser.find_elements("css selector", "#compare-table tbody tr")
    }
    assert "unresolved" in rows["pkg__resolved-1"]
    assert "resolved" in rows["pkg__resolved-1"]
    assert "SandboxStartError" in rows["pkg__infra-3"]
    assert "pkg__unresolved-2" not in rows  # the same outcome both times
    browser.save_screenshot(str(shots / "view-compare.png"))
    assert console_problems(browser) == []


def test_training_steps_plotted(browser: Any, tmp_path: Path, shots: Path) -> None:
    report = mixed_run(tmp_path)
    training = ROOT / "benchmarks" / "results" / "training-ags.json"
    page = tmp_path / "training.html"
    view(report, "--training", training, "--html", page)
    load(browser, page)
    modes = json.loads(training.read_text())["engines"]["ags"]["modes"]
    lines = browser.find_elements("css selector", "#training polyline.series")
    assert len(lines) == len(modes)
    points = lines[0].get_attribute("points").split()
    assert len(points) == len(modes[0]["step_waits"])
    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element("id", "training"))
    browser.save_screenshot(str(shots / "view-training.png"))
    assert console_problems(browser) == []


def test_ten_thousand_tasks_open_and_filter_in_time(browser: Any, tmp_path: Path) -> None:
    report = large_run(tmp_path)
    page = tmp_path / "large.html"
    view(report, "--html", page)
    load(browser, page)
    opened = browser.execute_script(
        "return performance.getEntriesByName('view-ready')[0].startTime / 1000"
    )
    filtered = browser.execute_script(
        """
        var s = document.getElementById('f-outcome'), t = performance.now();
        s.value = 'error'; s.dispatchEvent(new Event('change'));
        var c = document.getElementById('f-cause'); c.value = 'infrastructure';
        c.dispatchEvent(new Event('change'));
        var q = document.getElementById('f-search'); q.value = 'repo7';
        q.dispatchEvent(new Event('input'));
        document.body.offsetHeight;
        return (performance.now() - t) / 3000;
        """
    )
    count = browser.find_element("id", "count").text
    print(f"\n10,000 tasks ({page.stat().st_size / 1e6:.0f} MB page): opened in {opened:.2f}s, "
          f"a filter redraws in {filtered:.3f}s; load {os.getloadavg()[0]:.1f}")  # fmt: skip
    assert count.endswith("of 10000 tasks")
    assert not count.startswith("0 ")
    assert opened < LARGE_OPEN_BUDGET
    assert filtered < LARGE_FILTER_BUDGET
    assert console_problems(browser) == []


def test_served_page_fetches_its_data_from_loopback(browser: Any, tmp_path: Path) -> None:
    import threading

    from sandbox_runtime.swe.view import page_data
    from sandbox_runtime.swe.view._serve import make_server

    server = make_server(page_data([mixed_run(tmp_path)]))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host, port = server.server_address[:2]
        console_problems(browser)
        browser.get(f"http://{host!s}:{port}/")
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(browser, 60).until(
            lambda s: s.execute_script("return document.body.dataset.ready === 'true'")
        )
        assert browser.find_element("id", "count").text == "7 of 7 tasks"
        assert console_problems(browser) == []
    finally:
        server.shutdown()
        server.server_close()


#: A scripted agent that prints markup and appends to the task's tests: a flagged task whose
#: sandbox output would run as script if the page let it.
TAMPER_SCRIPT = [
    {
        "tool": "bash",
        "args": {"command": f"echo '{HOSTILE}'; printf '\\n# x\\n' >> tests/test_core.py"},
    },
    {"tool": "submit", "args": {}},
]


def test_a_real_run_page_flags_and_escapes(browser: Any, tmp_path: Path, shots: Path) -> None:
    """The README's main job on one bundled task, with an agent that touches the tests."""
    script = tmp_path / "tamper.json"
    script.write_text(json.dumps(TAMPER_SCRIPT))
    report, trajectories = tmp_path / "report.json", tmp_path / "trajectories.jsonl"
    command = [sys.executable, "-m", "sandbox_runtime.cli", "run", "bundled"]
    command += ["--backend", "local", "--agent", "scripted", "--script", str(script)]
    command += ["--grading", "benchmark", "--select", "sandbox-runtime-samples__csvline-1"]
    command += ["--quiet"]
    command += ["--report", str(report), "--trajectories", str(trajectories)]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=240)
    page = tmp_path / "report.html"
    view(report, "--html", page)
    load(browser, page)
    assert browser.find_element("id", "count").text == "1 of 1 tasks"
    assert choose(browser, "f-flag", "flagged").startswith("1 of 1")
    assert choose(browser, "f-outcome", "unresolved").startswith("1 of 1")
    click(browser, browser.find_element("css selector", "#rows tr"))
    detail = browser.find_element("id", "detail")
    assert HOSTILE in detail.text  # the sandbox's output, as text
    assert "tests/test_core.py" in detail.text
    assert "test file" in detail.text
    assert browser.title.startswith("sandbox-runtime")
    assert not browser.find_elements("css selector", "img")
    assert console_problems(browser) == []
