"""Listing sandboxes as E2B's ``GET /v2/sandboxes`` (and the older ``GET /sandboxes``) does.

AGS documents nothing about its E2B-compatible listing beyond the route, so this follows E2B's
API server: newest first unless ``order=asc``; ``startedAfter`` keeps sandboxes started at or
after it (compared at microsecond precision); ``template`` matches a template id or name and
an unknown one lists nothing; ``metadata`` is a URL-encoded ``k=v&...`` that every listed
sandbox must carry; ``state`` is a comma list of ``running``/``paused``.  Pages are at most
100 long (``limit`` is clamped into 1..100) and ``x-next-token`` is a keyset cursor
(base64url of ``<RFC 3339 start>__<sandbox id>``, ``__asc`` appended for ascending order),
so sandboxes started between two page requests neither repeat nor shift later pages.  A
token of the other order or that does not parse answers 400.  ``X-Total-Running`` gives the
number of running sandboxes that match, before paging.
"""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from ._state import Instance, ServiceError

__all__ = ["ListQuery", "e2b_state", "list_page"]

MAX_LIMIT = 100
_UTC = datetime.timezone.utc
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=_UTC)


def _bad(message: str) -> ServiceError:
    return ServiceError("InvalidParameter", message, http_status=400)


def _micros(timestamp: float) -> int:
    """A Unix time on the microsecond grid every comparison here uses.

    Rounded as ``datetime.fromtimestamp`` rounds, which is how ``startedAt`` is written:
    ``round(timestamp * 1e6)`` can land one microsecond away, and a client's
    ``startedAfter`` equal to a sandbox's ``startedAt`` would then miss that sandbox.
    """
    return _since_epoch(datetime.datetime.fromtimestamp(timestamp, tz=_UTC))


def _since_epoch(moment: datetime.datetime) -> int:
    """Whole microseconds since the epoch, in integers (no float on the way)."""
    return (moment - _EPOCH) // datetime.timedelta(microseconds=1)


def _parse_time(text: str) -> int:
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise _bad(f"Invalid startedAfter: {text!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_UTC)
    return _since_epoch(moment)


def _cursor(micros: int, sandbox_id: str, ascending: bool) -> str:
    moment = _EPOCH + datetime.timedelta(microseconds=micros)  # exact, unlike a float
    text = moment.isoformat(timespec="microseconds").replace("+00:00", "Z") + "__" + sandbox_id
    if ascending:
        text += "__asc"
    return base64.urlsafe_b64encode(text.encode()).decode()


def _parse_cursor(token: str, ascending: bool) -> tuple[int, str]:
    try:
        parts = base64.urlsafe_b64decode(token.encode()).decode().split("__")
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise _bad("Invalid next token") from exc
    token_ascending = len(parts) == 3 and parts[2] == "asc"
    if len(parts) not in (2, 3) or (len(parts) == 3 and not token_ascending):
        raise _bad("Invalid next token")
    if token_ascending != ascending:
        raise _bad("Invalid next token: cursor was issued for a different sort order")
    try:
        return _parse_time(parts[0]), parts[1]
    except ServiceError as exc:
        raise _bad("Invalid next token") from exc


@dataclass
class ListQuery:
    """The query string of a listing, checked."""

    metadata: dict[str, str]
    states: set[str]
    ascending: bool
    started_after: int | None
    template: str | None
    limit: int
    cursor: tuple[int, str] | None

    @classmethod
    def parse(cls, query: dict[str, list[str]]) -> ListQuery:
        """Read the E2B query parameters; bad values raise a 400 ``ServiceError``."""

        def last(name: str) -> str | None:
            values = query.get(name)
            return values[-1] if values else None

        metadata: dict[str, str] = {}
        for text in query.get("metadata", []):
            for key, values in parse_qs(text).items():
                metadata[key] = values[-1]
        state_text = ",".join(query.get("state", []))
        states = {s for s in state_text.split(",") if s} or {"running", "paused"}
        order = last("order")
        if order not in (None, "asc", "desc"):
            raise _bad(f'Invalid order parameter: unknown order "{order}"')
        ascending = order == "asc"
        limit_text = last("limit")
        try:
            limit = int(limit_text) if limit_text else MAX_LIMIT
        except ValueError as exc:
            raise _bad(f"Invalid limit: {limit_text!r}") from exc
        started = last("startedAfter")
        token = last("nextToken")
        return cls(
            metadata=metadata,
            states=states,
            ascending=ascending,
            started_after=_parse_time(started) if started else None,
            template=last("template") or None,
            limit=min(max(limit, 1), MAX_LIMIT),
            cursor=_parse_cursor(token, ascending) if token else None,
        )


def e2b_state(instance: Instance) -> str | None:
    """The instance's e2b ``state`` (``running`` or ``paused``), None once it is gone."""
    if instance.status in ("STARTING", "RUNNING"):
        return "running"
    if instance.status in ("PAUSING", "PAUSED", "RESUMING"):
        return "paused"
    return None


def list_page(
    instances: Sequence[Instance],
    query: ListQuery,
    render: Callable[[Instance], dict[str, Any]],
    *,
    paged: bool,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """One page of running and paused instances, and the headers (``x-next-token``, counts)."""
    matching = [
        i
        for i in instances
        if e2b_state(i) in query.states
        and all(i.metadata.get(k) == v for k, v in query.metadata.items())
        and (query.started_after is None or _micros(i.created) >= query.started_after)
        and (query.template is None or query.template in (i.tool.tool_id, i.tool.name))
    ]
    headers: dict[str, str] = {}
    if "running" in query.states:
        headers["X-Total-Running"] = str(sum(e2b_state(i) == "running" for i in matching))
    # Newest first, ties by id ascending; ascending order is the exact reverse.
    matching.sort(key=lambda i: (-_micros(i.created), i.instance_id))
    if query.ascending:
        matching.reverse()
    if not paged:
        return [render(i) for i in matching], {}
    if query.cursor is not None:
        at, last_id = query.cursor
        if query.ascending:
            matching = [
                i
                for i in matching
                if _micros(i.created) > at or (_micros(i.created) == at and i.instance_id < last_id)
            ]
        else:
            matching = [
                i
                for i in matching
                if _micros(i.created) < at or (_micros(i.created) == at and i.instance_id > last_id)
            ]
    page = matching[: query.limit]
    if len(matching) > query.limit:
        tail = page[-1]
        headers["x-next-token"] = _cursor(_micros(tail.created), tail.instance_id, query.ascending)
    return [render(i) for i in page], headers
