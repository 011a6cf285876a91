"""Rows that follow the published schemas field for field (values invented, shapes real).

R2E-Gym: the columns of R2E-Gym-Lite/-Subset, with ``parsed_commit_content`` as R2E-Gym's
``ParsedCommit.model_dump_json()`` writes it (entities, file contents, metadata included).
SWE-bench: the twelve columns of SWE-bench(-Lite), lists as JSON text; plus the newer
harness fields. SWE-smith: the HF dataset's columns. JSONL: the seed's task format.
"""

from __future__ import annotations

import json
from typing import Any

CODE_OLD = "def mean(values):\n    total = sum(values)\n    return total / len(values) - 1\n"
CODE_NEW = "def mean(values):\n    total = sum(values)\n    return total / len(values)\n"


def _entity(name: str, path: str) -> dict[str, Any]:
    return {
        "file_name": path,
        "type": "function",
        "name": name,
        "content": CODE_NEW,
        "ast_type_str": "FunctionDef",
        "start_lineno": 1,
        "end_lineno": 3,
        "parent": None,
    }


def parsed_commit() -> dict[str, Any]:
    code = {
        "old_file_content": CODE_OLD,
        "new_file_content": CODE_NEW,
        "header": {"file": {"path": "stats/core.py"}, "misc_line": None},
        "index_line": {
            "old_commit_hash": "1a2b3c4",
            "new_commit_hash": "5d6e7f8",
            "mode": "100644",
        },
        "is_binary_file": False,
        "binary_line": None,
        "minus_file": {"path": "a/stats/core.py"},
        "plus_file": {"path": "b/stats/core.py"},
        "hunks": [
            {
                "descriptor": {
                    "old_range": {"start": 1, "length": 3},
                    "new_range": {"start": 1, "length": 3},
                    "section": "",
                },
                "line_group": {
                    "all_lines": [
                        {"content": "def mean(values):", "type": "context"},
                        {"content": "    total = sum(values)", "type": "context"},
                        {"content": "    return total / len(values) - 1", "type": "deleted"},
                        {"content": "    return total / len(values)", "type": "added"},
                    ]
                },
                "modified_entities": [_entity("mean", "stats/core.py")],
                "added_entities": [],
                "deleted_entities": [],
            }
        ],
    }
    test = {
        "old_file_content": "",
        "new_file_content": "from stats.core import mean\n\ndef test_mean():\n    assert mean([1, 3]) == 2\n",  # noqa: E501
        "header": {"file": {"path": "tests/test_core.py"}, "misc_line": "new file mode 100644"},
        "index_line": {"old_commit_hash": "0000000", "new_commit_hash": "9a8b7c6", "mode": ""},
        "is_binary_file": False,
        "binary_line": None,
        "minus_file": {"path": "/dev/null"},
        "plus_file": {"path": "b/tests/test_core.py"},
        "hunks": [
            {
                "descriptor": {
                    "old_range": {"start": 0, "length": 0},
                    "new_range": {"start": 1, "length": 4},
                    "section": "",
                },
                "line_group": {
                    "all_lines": [
                        {"content": "from stats.core import mean", "type": "added"},
                        {"content": "", "type": "added"},
                        {"content": "def test_mean():", "type": "added"},
                        {"content": "    assert mean([1, 3]) == 2", "type": "added"},
                    ]
                },
                "modified_entities": [],
                "added_entities": [_entity("test_mean", "tests/test_core.py")],
                "deleted_entities": [],
            }
        ],
    }
    return {
        "file_diffs": [code, test],
        "old_commit_hash": "8f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6",
        "new_commit_hash": "0f9e8d7c6b5a4938271605f4e3d2c1b0a9f8e7d6",
        "commit_message": "Fix mean() off by one",
        "commit_date": "2019-03-01T12:00:00",
        "metadata": {},
    }


GOLD_PATCH = (
    "diff --git a/stats/core.py b/stats/core.py\n"
    "index 1a2b3c4..5d6e7f8 100644\n"
    "--- a/stats/core.py\n"
    "+++ b/stats/core.py\n"
    "@@ -1,3 +1,3 @@\n"
    " def mean(values):\n"
    "     total = sum(values)\n"
    "-    return total / len(values) - 1\n"
    "+    return total / len(values)\n"
)


def r2e_row() -> dict[str, Any]:
    return {
        "repo_name": "orange3",
        "docker_image": "namanjain12/orange3_final:0f9e8d7c6b5a4938271605f4e3d2c1b0a9f8e7d6",
        "commit_hash": "0f9e8d7c6b5a4938271605f4e3d2c1b0a9f8e7d6",
        "parsed_commit_content": json.dumps(parsed_commit()),
        "execution_result_content": json.dumps({"repo_name": "orange3"}),
        "modified_files": ["stats/core.py", "tests/test_core.py"],
        "modified_entity_summaries": [
            {
                "ast_type_str": "FunctionDef",
                "end_lineno": 3,
                "file_name": "stats/core.py",
                "name": "mean",
                "start_lineno": 1,
                "type": "function",
            }
        ],
        "relevant_files": ["stats/core.py"],
        "num_non_test_files": 1,
        "num_non_test_func_methods": 1,
        "num_non_test_lines": 2,
        "prompt": "Write an issue for this commit.",
        "problem_statement": "[ISSUE]\nmean() is off by one\n[/ISSUE]",
        "expected_output_json": json.dumps({"test_mean": "PASSED", "TestStats.test_var": "PASSED"}),
    }


def swebench_row() -> dict[str, Any]:
    return {
        "repo": "psf/requests",
        "instance_id": "psf__requests-2317",
        "base_commit": "091991be0da19de9108dbe5e3752917fea3d7fdc",
        "patch": "diff --git a/requests/sessions.py b/requests/sessions.py\n--- a/requests/sessions.py\n+++ b/requests/sessions.py\n@@ -1 +1 @@\n-a\n+b\n",  # noqa: E501
        "test_patch": "diff --git a/test_requests.py b/test_requests.py\n--- a/test_requests.py\n+++ b/test_requests.py\n@@ -1 +1 @@\n-a\n+b\n",  # noqa: E501
        "problem_statement": "method = builtin_str(method) problem",
        "hints_text": "",
        "created_at": "2014-11-01T02:20:16Z",
        "version": "2.4",
        "FAIL_TO_PASS": '["test_requests.py::RequestsTestCase::test_HTTP_200_OK_GET_ALTERNATIVE"]',
        "PASS_TO_PASS": '["test_requests.py::RequestsTestCase::test_BASICAUTH_TUPLE_HTTP_200_OK_GET", "test_requests.py::RequestsTestCase::test_DIGEST_STREAM"]',  # noqa: E501
        "environment_setup_commit": "091991be0da19de9108dbe5e3752917fea3d7fdc",
    }


def swesmith_row() -> dict[str, Any]:
    return {
        "instance_id": "oauthlib__oauthlib.1fd52536.combine_file__09vlzh3l",
        "repo": "swesmith/oauthlib__oauthlib.1fd52536",
        "patch": "diff --git a/oauthlib/common.py b/oauthlib/common.py\n--- a/oauthlib/common.py\n+++ b/oauthlib/common.py\n@@ -1 +1 @@\n-good\n+bad\n",  # noqa: E501
        "FAIL_TO_PASS": ["tests/test_common.py::ParametersTest::test_urldecode"],
        "PASS_TO_PASS": ["tests/test_common.py::ParametersTest::test_extract_params"],
        "created_at": "2025-03-14T00:00:00",
        "image_name": "swesmith.x86_64.oauthlib__oauthlib.1fd52536",
        "base_commit": "1fd52536a2a5d2e6a7f5d3b0b1e8c0d5f6a7b8c9",
        "problem_statement": "urldecode accepts invalid input",
    }


def jsonl_row(ds_json: str | None = None) -> dict[str, Any]:
    return {
        "task_id": "repoenv_sample_calc_fix",
        "max_steps": 6,
        "issue": {
            "id": "calc-add-bug",
            "title": "Fix calc.add returning subtraction",
            "body": "The calc.add helper is subtracting numbers.",
            "failure_frame": {"path": "app/calc.py", "lineno": 5, "function": "add"},
        },
        "sandbox": {
            "docker_image": "graph_planner/repoenv-sample:latest",
            "workdir": "/repo",
            "mounts": {},
            "env": {},
            "backend": "repoenv",
            "r2e_ds_json": ds_json,
        },
    }
