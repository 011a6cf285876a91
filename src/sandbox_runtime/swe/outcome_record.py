"""Out-of-band test outcomes: what pytest decided, recorded where the test log cannot lie.

Grading reads per-test results from the test run's log, and the code under test writes to
that log too: a package can print ``PASSED tests/test_x.py::test_y`` when it is imported or
when the interpreter exits, after pytest's own summary, and a log parser that keeps the last
word for each test believes it.  Strict grading therefore has pytest record its decisions a
second time, out of band:

* before the task's test script runs, a tiny pytest plugin with a random module name is
  written to a random directory beside the repository (never inside it) and loaded through
  ``PYTEST_ADDOPTS=-p <name>`` and ``PYTHONPATH``; every report pytest makes (collection
  errors, each test's setup, call and teardown) is appended, as one JSON line, to a record
  file whose random path exists only in the plugin's source and on the caller's side;
* after the run, the caller reads the record through the backend's file plane (trusted code
  outside the sandbox) and checks every verdict the log claims: a ``PASSED`` (``FAILED``,
  ``XFAIL``...) line for a test the record saw decided otherwise, a claim in a short test
  summary that pytest never made, a claim for a test of a file pytest ran but never reported,
  a session that started and never finished (``os._exit`` mid-run), a record that is garbled
  or was removed: each makes the reward 0 and flags the result
  (``GradeResult.outcome_record``), whatever the log's parser concluded.  A log that shows a
  pytest run the record did not see (a script that resets ``PYTHONPATH`` or
  ``PYTEST_ADDOPTS``), or more sessions than it saw, can be neither believed nor accused:
  the result is an error (no reward).

What this does not vouch for, by design: runs that are not pytest (``unittest``, Django's
``runtests.py``, sympy's ``bin/test``) leave no record and are graded from their log as
before; a module that finds the record through the interpreter's memory and rewrites it
(or empties it, or adds lines to it) is the documented limit of any grading that runs the
fix's code (the canary, :mod:`sandbox_runtime.swe.canary`, catches the common forms of
patching the machinery).  A
record that cannot be read for a sandbox fault is an infrastructure error (no reward).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import posixpath
import re
import secrets
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError, SandboxFileNotFoundError
from sandbox_runtime.swe.parsers import strip_ansi


class Graded(Protocol):
    """What judging reads and sets of a grade.

    :class:`sandbox_runtime.swe.grading.GradeResult`, named by its shape: the module that
    defines it runs the test scripts this one wraps.
    """

    reward: float | None
    reason: str
    status_map: dict[str, str]
    test_output: str
    outcome_record: str


G = TypeVar("G", bound=Graded)


__all__ = [
    "FLAGGED_STATES",
    "RECORD_ABSENT",
    "RECORD_CONTRADICTED",
    "RECORD_GARBLED",
    "RECORD_INCOMPLETE",
    "RECORD_MISSING",
    "RECORD_PARTIAL",
    "RECORD_UNLOADED",
    "RECORD_VOUCHED",
    "SUSPECT_STATES",
    "OutcomeRecord",
    "Recorder",
    "check_record",
    "claims_in",
    "judge",
    "parse_record",
    "plugin_source",
    "read_record",
    "recorded",
    "verdict_of",
    "wrap_test_script",
]

#: The log agrees with the record.
RECORD_VOUCHED = "vouched"
#: No pytest session recorded, and the test script runs no pytest: a runner strict grading
#: cannot vouch for (graded from its log as before).
RECORD_ABSENT = "absent"
#: The log claims a verdict the record contradicts (or never made): an output forgery.
RECORD_CONTRADICTED = "contradicted"
#: A pytest session started and never finished (the process was cut short from inside).
RECORD_INCOMPLETE = "incomplete"
#: The record holds lines pytest's plugin cannot have written.
RECORD_GARBLED = "garbled"
#: The log shows a pytest run, and the record it must have left is gone.
RECORD_MISSING = "missing"
#: The log shows more pytest sessions than the record: some ran without the plugin.
RECORD_PARTIAL = "partial"
#: The log shows a pytest run the record did not see (the plugin could not be imported, or
#: the script reset ``PYTEST_ADDOPTS``): nothing can be vouched for, an error.
RECORD_UNLOADED = "unloaded"
#: States that mean the test run was interfered with (the reward is 0 and flagged).
FLAGGED_STATES = frozenset({RECORD_CONTRADICTED, RECORD_INCOMPLETE, RECORD_GARBLED, RECORD_MISSING})
#: States a report counts as an integrity flag (a partial record may be a forged session line).
SUSPECT_STATES = FLAGGED_STATES | {RECORD_PARTIAL}

_WORDS = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
_CLAIM_FIRST = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S.*)$")
_CLAIM_LAST = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
_SUMMARY = "short test summary info"
_SESSION = re.compile(r"^=+ test session starts =+$")
_PLUGIN_MISSING = r"(?:Error importing plugin|No module named)\W+"

# The plugin runs inside the sandbox's interpreter, whatever its age: no f-strings, no
# annotations, attribute hook markers (old pluggy), and both of xdist's worker attributes.
_PLUGIN = """\
import json as _json
import os as _os

# Beside this file: the record is where the grader wrote it, whatever path the test
# process sees that directory by (local sandboxes without isolation see host paths).
_PATH = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), {name!r})
_CONFIG = []


def _put(event):
    event["pid"] = _os.getpid()
    line = (_json.dumps(event, sort_keys=True) + "\\n").encode("utf-8")
    try:
        fd = _os.open(_PATH, _os.O_WRONLY | _os.O_APPEND | _os.O_CREAT, 0o666)
    except OSError:
        return  # the record then lacks this session, which grading reads as missing
    try:
        _os.write(fd, line)
    finally:
        _os.close(fd)


def _on():
    return bool(_CONFIG) and not (
        hasattr(_CONFIG[0], "workerinput") or hasattr(_CONFIG[0], "slaveinput")
    )


def _shown(nodeid):
    try:
        return _CONFIG[0].cwd_relative_nodeid(nodeid)
    except Exception:
        return nodeid


def pytest_configure(config):
    _CONFIG.append(config)


def pytest_sessionstart(session):
    if _on():
        _put({{"e": "start"}})


def pytest_collectreport(report):
    if _on() and report.failed:
        _put({{"e": "report", "id": report.nodeid, "shown": _shown(report.nodeid), "w": "ERROR"}})


def _word(report):
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "XPASS" if xfail else "PASSED"
        if report.failed:
            return "FAILED"
        if report.skipped:
            return "XFAIL" if xfail else "SKIPPED"
        return None
    if report.failed:
        return "ERROR"
    if report.skipped:
        return "XFAIL" if xfail else "SKIPPED"
    return None


def pytest_runtest_logreport(report):
    if not _on():
        return
    word = _word(report)
    if word is not None:
        _put({{"e": "report", "id": report.nodeid, "shown": _shown(report.nodeid), "w": word}})


def pytest_sessionfinish(session, exitstatus):
    if _on():
        _put({{"e": "finish", "status": int(exitstatus)}})


pytest_sessionfinish.trylast = True
"""


def plugin_source(record_path: str) -> str:
    """The plugin's source, appending to the file named as ``record_path`` beside itself.

    It works on any Python 3 pytest.
    """
    return _PLUGIN.format(name=posixpath.basename(record_path))


@dataclass
class Recorder:
    """Where one grading's plugin and record live in the grading sandbox (random names).

    ``plugin_failed`` is learnt while test scripts run: whether an interpreter could not
    import the plugin.
    """

    directory: str
    module: str
    record: str
    plugin_failed: bool = False

    @classmethod
    def beside(cls, workdir: str) -> Recorder:
        """Fresh random names in the directory that holds ``workdir`` (outside the repo)."""
        parent = posixpath.dirname(workdir.rstrip("/")) or "/"
        directory = posixpath.join(parent, f".sr-{secrets.token_hex(8)}")
        return cls(
            directory,
            f"sr_outcomes_{secrets.token_hex(6)}",
            posixpath.join(directory, f"{secrets.token_hex(8)}.jsonl"),
        )

    def install(self, sandbox: SandboxRuntime) -> None:
        """Write the plugin and an empty record (a record that is later gone was removed).

        Both are writable by everyone: the tests may run as another user than the file plane.
        """
        sandbox.write_text(
            posixpath.join(self.directory, f"{self.module}.py"), plugin_source(self.record)
        )
        sandbox.write_text(self.record, "", mode=0o666)
        sandbox.exec(f"chmod 0777 {shlex.quote(self.directory)}", timeout=60)

    def remove(self, sandbox: SandboxRuntime) -> None:
        """Remove the plugin's directory (best effort: the sandbox is thrown away anyway)."""
        with contextlib.suppress(SandboxError):
            sandbox.exec(f"rm -rf {shlex.quote(self.directory)}", timeout=60)

    def wrap(self, script: str) -> str:
        """``script`` with the plugin put on pytest's command line and Python's path.

        Where commands do not see the file plane's absolute paths (a local sandbox without
        isolation: they mean host paths), the directory is found beside the script's working
        directory, the repository, as :meth:`beside` placed it.
        """
        directory = shlex.quote(self.directory)
        name = shlex.quote(posixpath.basename(self.directory))
        return (
            f"_sr_dir={directory}\n"
            f'[ -d "$_sr_dir" ] || _sr_dir="$(cd .. 2>/dev/null && pwd)"/{name}\n'
            f'export PYTHONPATH="$_sr_dir${{PYTHONPATH:+:$PYTHONPATH}}"\n'
            f'export PYTEST_ADDOPTS="${{PYTEST_ADDOPTS:+$PYTEST_ADDOPTS }}-p {self.module}"\n'
            "unset _sr_dir\n" + script
        )

    def saw(self, output: str) -> None:
        """Note a run whose interpreter could not import the plugin (a reset ``PYTHONPATH``)."""
        pattern = _PLUGIN_MISSING + re.escape(self.module) + r"\b"
        self.plugin_failed = self.plugin_failed or bool(re.search(pattern, output))


_active: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "sandbox_runtime_outcome_recorder", default=None
)


def wrap_test_script(script: str) -> tuple[str, Recorder | None]:
    """The script to run for a task's tests: recorded when strict grading asked for it."""
    recorder = _active.get()
    return (recorder.wrap(script), recorder) if recorder is not None else (script, None)


@contextlib.contextmanager
def recorded(sandbox: SandboxRuntime) -> Iterator[Recorder]:
    """Within the block, task test scripts run in ``sandbox`` leave an out-of-band record."""
    recorder = Recorder.beside(sandbox.workdir)
    try:
        recorder.install(sandbox)
    except SandboxError:  # the directory above the repository is not the user's to write
        recorder = Recorder.beside("/tmp/repository")
        recorder.install(sandbox)
    token = _active.set(recorder)
    try:
        yield recorder
    finally:
        _active.reset(token)


@dataclass
class OutcomeRecord:
    """What the plugin wrote: each test's words, and the sessions that started and ended."""

    words: dict[str, set[str]] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)
    started: dict[int, int] = field(default_factory=dict)
    finished: dict[int, int] = field(default_factory=dict)

    @property
    def sessions(self) -> int:
        """How many pytest sessions started."""
        return sum(self.started.values())

    @property
    def unfinished(self) -> int:
        """Sessions that started and never reached their end."""
        return sum(max(0, count - self.finished.get(pid, 0)) for pid, count in self.started.items())

    def add(self, test_id: str, word: str) -> None:
        """Note that pytest reported ``word`` for ``test_id``."""
        self.words.setdefault(test_id, set()).add(word)
        self.files.add(test_id.split("::", 1)[0])


def parse_record(text: str) -> OutcomeRecord | None:
    """The record's content, or ``None`` when a line is not one the plugin writes."""
    record = OutcomeRecord()
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            return None
        if not isinstance(event, dict) or not isinstance(event.get("pid"), int):
            return None
        kind, pid = event.get("e"), event["pid"]
        if kind == "start":
            record.started[pid] = record.started.get(pid, 0) + 1
        elif kind == "finish":
            record.finished[pid] = record.finished.get(pid, 0) + 1
        elif kind == "report" and event.get("w") in _WORDS:
            ids = {event.get("id"), event.get("shown")}
            if not all(isinstance(value, str) for value in ids):
                return None
            for test_id in ids:
                record.add(str(test_id), str(event["w"]))
        else:
            return None
    return record


def read_record(sandbox: SandboxRuntime, recorder: Recorder) -> str | None:
    """The record's text, ``None`` when there is none; a sandbox fault raises."""
    try:
        return sandbox.read_text(recorder.record, errors="replace")
    except SandboxFileNotFoundError:
        return None


@dataclass(frozen=True)
class Claim:
    """A verdict the log states for a test, and whether it sits in a short test summary."""

    test_id: str
    word: str
    in_summary: bool


def claims_in(output: str) -> list[Claim]:
    """Every per-test verdict line in a pytest log (``-rA`` and verbose forms)."""
    claims: list[Claim] = []
    in_summary = False
    for line in strip_ansi(output).splitlines():
        if _SUMMARY in line:
            in_summary = True
            continue
        if _SESSION.match(line.strip()):
            in_summary = False
            continue
        first = _CLAIM_FIRST.match(line)
        if first:
            test_id = first.group(2).split(" - ", 1)[0].strip()
            if first.group(1) == "SKIPPED" and test_id.startswith("["):
                continue  # ``SKIPPED [1] file:line: reason`` names no test
            claims.append(Claim(test_id, first.group(1), in_summary))
            continue
        last = _CLAIM_LAST.match(line)
        if last:
            claims.append(Claim(last.group(1), last.group(2), in_summary))
    return claims


def _contradiction(claim: Claim, record: OutcomeRecord) -> str | None:
    words = record.words.get(claim.test_id)
    if words is not None:
        if claim.word in words:
            return None
        return f"the log says {claim.word} {claim.test_id}, pytest said {'/'.join(sorted(words))}"
    if claim.in_summary:
        return f"the log's summary says {claim.word} {claim.test_id}, a test pytest never reported"
    if claim.test_id.split("::", 1)[0] in record.files:
        return f"the log says {claim.word} {claim.test_id}, a test pytest ran its file but not it"
    return None  # another run's text (a test's own output, pytester's inner sessions)


def _shows_pytest(output: str) -> bool:
    """True when a log holds what only pytest prints (a summary, a session, a node id's verdict)."""
    text = strip_ansi(output)
    if _SUMMARY in text or any(_SESSION.match(line.strip()) for line in text.splitlines()):
        return True
    return any("::" in claim.test_id for claim in claims_in(output))


def verdict_of(recorder: Recorder, text: str | None, graded: Graded) -> tuple[str, str]:
    """The record's state after a graded run, and why (see the module's docstring)."""
    output = graded.test_output
    if text is None:
        return RECORD_MISSING, "the record strict grading left for pytest was removed"
    record = parse_record(text)
    if record is None:
        return RECORD_GARBLED, "the record holds lines pytest's plugin did not write"
    if not record.sessions:
        if recorder.plugin_failed:
            return RECORD_UNLOADED, (
                "the test run's interpreter could not import strict grading's recording "
                "plugin (the script resets PYTHONPATH)"
            )
        if not _shows_pytest(output):
            return RECORD_ABSENT, ""
        return RECORD_UNLOADED, (
            "the log shows a pytest run the record did not see (the script resets "
            "PYTEST_ADDOPTS, or the record was emptied)"
        )
    if record.unfinished:
        return RECORD_INCOMPLETE, (
            f"{record.unfinished} of {record.sessions} pytest session(s) never finished "
            "(the test process was cut short)"
        )
    shown = sum(1 for line in strip_ansi(output).splitlines() if _SESSION.match(line.strip()))
    if shown > record.sessions:
        return RECORD_PARTIAL, (
            f"the log shows {shown} pytest sessions and the record {record.sessions}: "
            "some ran without the recording plugin"
        )
    claims = claims_in(output)
    for claim in claims:
        found = _contradiction(claim, record)
        if found is not None:
            return RECORD_CONTRADICTED, found
    if record.words and graded.status_map and not claims:
        return RECORD_CONTRADICTED, (
            f"pytest reported {len(record.words)} results and the log, parsed to "
            f"{len(graded.status_map)} verdicts, shows none of pytest's lines"
        )
    return RECORD_VOUCHED, ""


def judge(graded: G, state: str, why: str) -> G:
    """``graded`` with the record's verdict applied: a flagged state makes it 0.

    A record that cannot vouch for the log and cannot accuse it either (some sessions ran
    without the plugin, or the plugin could not load) makes the reward an error (no number):
    a 0 would punish a fix for the test script's setup, a 1 would believe the log.
    """
    graded.outcome_record = state
    if graded.reward is None:
        return graded
    if state in FLAGGED_STATES:
        if graded.reward:
            graded.reason = f"output forgery ({why}); the log said: {graded.reason}"
        else:
            graded.reason = f"{graded.reason}; output forgery ({why})"
        graded.reward = 0.0
    elif state in (RECORD_PARTIAL, RECORD_UNLOADED):
        graded.reason = f"test error: strict grading cannot vouch for this log ({why})"
        graded.reward = None
    return graded


def check_record(sandbox: SandboxRuntime, recorder: Recorder, graded: G) -> G:
    """Read the record and judge ``graded`` by it; a sandbox fault reading it is an error."""
    if graded.reward is None:
        return graded
    try:
        text = read_record(sandbox, recorder)
        if text is None and not sandbox.is_alive():
            # Not removed from inside: the sandbox itself is gone (some backends then say
            # "no such file"), a fault of the infrastructure, never a 0.
            raise SandboxError("the grading sandbox is gone")
    except SandboxError as exc:
        graded.reward = None
        graded.reason = f"infrastructure error: reading the outcome record: {exc}"[:500]
        return graded
    state, why = verdict_of(recorder, text, graded)
    return judge(graded, state, why)
