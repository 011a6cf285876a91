from __future__ import annotations

import pytest

from sandbox_runtime._core.output import HeadTailBuffer


def test_small_output_is_kept_whole() -> None:
    buffer = HeadTailBuffer(100)
    buffer.write(b"hello ")
    buffer.write(b"world")
    assert buffer.getvalue() == b"hello world"
    assert not buffer.truncated
    assert buffer.total == 11


def test_exactly_at_the_limit_is_not_truncated() -> None:
    buffer = HeadTailBuffer(10)
    buffer.write(b"0123456789")
    assert buffer.getvalue() == b"0123456789"
    assert not buffer.truncated


def test_head_and_tail_survive_across_many_chunks() -> None:
    buffer = HeadTailBuffer(10)
    data = bytes(range(100))
    for index in range(0, 100, 7):
        buffer.write(data[index : index + 7])
    value = buffer.getvalue()
    assert buffer.truncated
    assert buffer.total == 100
    assert value.startswith(bytes(range(5)))
    assert value.endswith(bytes(range(95, 100)))
    assert b"90 bytes omitted" in value


def test_one_huge_chunk() -> None:
    buffer = HeadTailBuffer(8)
    buffer.write(b"a" * 4 + b"x" * 1000 + b"b" * 4)
    assert buffer.getvalue().startswith(b"aaaa")
    assert buffer.getvalue().endswith(b"bbbb")


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        HeadTailBuffer(0)
