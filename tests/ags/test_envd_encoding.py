"""Which downloads the envd emulation gzips: envd's ``Accept-Encoding`` negotiation, whose
corner cases (qualities, ``identity``, ``*``) no SDK call sends."""

from __future__ import annotations

import pytest

from sandbox_runtime._envd.server.app import _wants_gzip


@pytest.mark.parametrize(
    ("header", "gzipped"),
    [
        ("", False),  # no header: identity
        ("gzip", True),  # the SDK's gzip=True
        ("gzip, deflate", True),  # httpx's default
        ("br, gzip;q=0.8", True),  # an encoding envd lacks is passed over
        ("deflate", False),
        ("gzip;q=0", False),
        ("identity", False),
        ("identity;q=1, gzip;q=0.5", False),  # identity ranks first
        ("*", False),  # anything: envd keeps identity
        ("identity;q=0, *", True),  # identity refused: the wildcard means gzip
        ("*;q=0, gzip", True),
    ],
)
def test_gzip_is_negotiated_as_envd_does(header: str, gzipped: bool) -> None:
    assert _wants_gzip(header) is gzipped
