"""``sandbox-runtime view`` without a browser: the page's data, escaping, bad input, serving.

The browser tests (``test_view_browser.py``) check what a person sees; these check what the
page is built from, on reports written by the runner's own writers (``view_runs.py``).
"""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from pathlib import Path

import pytest

from sandbox_runtime.cli import main
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe.view import error_cause, page_data, render_page
from sandbox_runtime.swe.view._serve import make_server
from tests.swe.view_runs import HOSTILE, before_run, mixed_run


def test_tasks_joined_with_their_trajectories_and_causes(tmp_path: Path) -> None:
    data = page_data([mixed_run(tmp_path)])
    tasks = {task["key"]: task for task in data["runs"][0]["tasks"]}
    assert set(tasks) >= {"pkg__group-6#0", "pkg__group-6#1", "pkg__infra-3"}
    assert all(task["has_trajectory"] for task in tasks.values())
    assert tasks["pkg__resolved-1"]["actions"][0]["arguments"]["command"].startswith("grep")
    assert tasks["pkg__infra-3"]["cause"] == "infrastructure"
    assert tasks["pkg__timeout-4"]["cause"] == "tests timed out"
    assert tasks["pkg__resolved-1"]["cause"] == ""
    assert data["compare"] is None


def test_error_causes() -> None:
    assert error_cause({"reward": 0.0, "reason": "tests failed"}) == ""
    assert error_cause({"reward": None, "reason": "error: ImagePullError: no"}) == "infrastructure"
    assert error_cause({"reward": None, "reason": "test error: no results"}) == "test harness"
    assert error_cause({"reward": None, "reason": "x (agent error: boom)"}) == "agent"
    assert error_cause({"reward": None, "reason": "error: ConfigError: bad row"}) == "task"


def test_compare_names_each_change_with_both_reasons(tmp_path: Path) -> None:
    data = page_data([before_run(tmp_path), mixed_run(tmp_path)])
    changes = {change["key"]: change for change in data["compare"]["changed"]}
    assert changes["pkg__resolved-1"]["before"]["outcome"] == "unresolved"
    assert changes["pkg__resolved-1"]["after"]["outcome"] == "resolved"
    assert "SandboxStartError" in changes["pkg__infra-3"]["after"]["reason"]
    assert changes["pkg__group-6#0"]["before"]["outcome"] == "missing"
    assert "pkg__unresolved-2" not in changes
    assert data["compare"]["same"] == 1


def test_no_data_string_can_leave_the_data_block(tmp_path: Path) -> None:
    page = render_page(page_data([mixed_run(tmp_path)]), title="t")
    block = page.split('id="view-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block
    assert ">" not in block
    tasks = json.loads(block)["runs"][0]["tasks"]
    assert any(task["key"].endswith(HOSTILE) for task in tasks)  # ... and the text is intact
    assert len(re.findall(r"<script", page)) == 2  # the data block and the page's script
    assert "script-src 'sha256-" in page  # only the page's own script may run


def test_cli_writes_the_page_and_finds_trajectories_beside_the_report(tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    assert main(["view", str(mixed_run(tmp_path)), "--html", str(out)]) == 0
    text = out.read_text()
    assert "pkg__infra-3" in text
    assert "grep -n split" in text
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")  # nothing fetched


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", r"report\.json:1: not JSON"),
        ('{"tasks": 3}', r"not a run report"),
        ('{"tasks": [{"reward": 1}]}', r"tasks\[0\]: an entry needs 'task_id'"),
    ],
)
def test_bad_reports_are_one_line_errors(tmp_path: Path, content: str, expected: str) -> None:
    report = tmp_path / "report.json"
    report.write_text(content)
    with pytest.raises(ConfigError, match=expected):
        page_data([report])


def test_bad_trajectory_line_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = mixed_run(tmp_path)
    lines = (tmp_path / "after.jsonl").read_text().splitlines()
    (tmp_path / "after.jsonl").write_text("\n".join([lines[0], "{oops", *lines[1:]]) + "\n")
    assert main(["view", str(report), "--html", str(tmp_path / "x.html")]) == 2
    assert "after.jsonl:2: not JSON" in capsys.readouterr().err


def test_serve_answers_on_loopback_with_the_page_and_its_data(tmp_path: Path) -> None:
    data = page_data([mixed_run(tmp_path)])
    server = make_server(data)
    host, port = server.server_address[:2]
    assert host == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as reply:
            page = reply.read().decode()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/data.json", timeout=10) as reply:
            served = json.loads(reply.read())
    finally:
        server.shutdown()
        server.server_close()
    assert 'id="view-data"></script>' in page  # the page without its data ...
    assert served["runs"][0]["tasks"][2]["key"] == "pkg__infra-3"  # ... which is beside it


def test_replay_and_training_figures_join_the_page(tmp_path: Path) -> None:
    from sandbox_runtime.swe.replay import ReplayResult
    from tests.swe.view_runs import outcome

    replayed = ReplayResult(
        "pkg__resolved-1", 1.0, "resolved", outcome("pkg__resolved-1", 0.0, "x")
    )
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps({"records": [replayed.to_dict()]}))
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps([{"step": 0, "reward": 0.5, "reward_lost": 0.1}, {"step": 1}]))
    data = page_data([mixed_run(tmp_path)], replay=replay, training=steps)
    assert data["replay"]["pkg__resolved-1"]["status"] == "disagree"
    assert [plot["title"] for plot in data["training"]] == [
        "mean reward",
        "reward lost to infrastructure",
    ]
    assert data["training"][0]["series"]["reward"] == [0.5, None]


def test_a_busy_port_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = mixed_run(tmp_path)
    taken = make_server(page_data([report]))
    try:
        port = str(taken.server_address[1])
        assert main(["view", str(report), "--serve", "--port", port]) == 2
    finally:
        taken.server_close()
    assert f"cannot serve on 127.0.0.1:{port}" in capsys.readouterr().err
