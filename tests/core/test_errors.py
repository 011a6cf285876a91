"""The exception tree drawn in ``errors``' docstring is the tree the module defines.

The drawing is where a caller looks to decide what to catch; a class added without it (as
``SandboxReadOnlyError`` once was) is an error nobody knows to expect.
"""

from __future__ import annotations

import builtins
import inspect
import re
import textwrap

from sandbox_runtime import errors

_LINE = re.compile(r"^(?P<indent>[ │├└─]*)(?P<name>[A-Z]\w+)(?: \((?P<builtin>\w+)\))?")


def _drawn_tree() -> list[tuple[int, str, str | None]]:
    """``(depth, class name, builtin base or None)`` for each line of the drawing."""
    doc = errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    drawn = []
    for line in textwrap.dedent(block).splitlines():
        match = _LINE.match(line)
        assert match is not None, f"not a line of the tree: {line!r}"
        drawn.append((len(match["indent"]) // 4, match["name"], match["builtin"]))
    return drawn


def _defined() -> dict[str, type[BaseException]]:
    return {
        name: value
        for name, value in vars(errors).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
    }


def test_every_exception_class_is_drawn_once() -> None:
    drawn = [name for _, name, _ in _drawn_tree()]
    assert sorted(drawn) == sorted(_defined())


def test_the_drawing_shows_each_class_s_parent_and_builtin_base() -> None:
    defined = _defined()
    parents: list[str] = []
    for depth, name, builtin in _drawn_tree():
        cls = defined[name]
        del parents[depth:]
        if parents:
            assert cls.__bases__[0] is defined[parents[-1]], f"{name} is not under {parents[-1]}"
        else:
            assert cls is errors.SandboxError
        expected = {base.__name__ for base in cls.__bases__[1:]}
        assert expected == ({builtin} if builtin else set()), f"{name}'s builtin base"
        assert all(getattr(builtins, base) in cls.__bases__ for base in expected)
        parents.append(name)


def test_a_cyclic_chain_of_causes_ends() -> None:
    """An error raised from itself once made the agent's error translation spin forever."""
    from sandbox_runtime._envd.agent import _caused_by, _nothing_sent

    first, second = OSError("first"), OSError("second")
    first.__cause__, second.__cause__ = second, first
    itself = OSError("itself")
    itself.__cause__ = itself
    for chain in (first, itself):
        assert not _caused_by(chain, KeyError)
        assert _caused_by(chain, OSError)
        assert not _nothing_sent(chain)


def test_no_space_is_an_os_error_with_its_errno() -> None:
    import errno

    from sandbox_runtime import SandboxError, SandboxNoSpaceError

    error = SandboxNoSpaceError("no space left in the sandbox writing /tmp/x")
    assert isinstance(error, SandboxError)
    assert isinstance(error, OSError)
    assert error.errno == errno.ENOSPC
    assert str(error) == "no space left in the sandbox writing /tmp/x"
