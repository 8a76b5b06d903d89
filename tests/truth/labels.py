"""The truth label every tools/call of the corpus carries in ``params._meta``, written by the driver.

    {"truth": {"request": "b/r1/progress", "attempt": 2, "kind": "retry",
               "origin": "app-retry", "reexecutes": true}}

The label travels inside the capture, in the request body, so the scorer reads what the client did
from the flow file and never from the analyzer. The analyzer's request digest leaves ``_meta`` out,
so a label changes nothing it compares.

- request: one logical request of the application, unique in the corpus ("<family>/<run>/<name>").
- attempt: 1-based, per logical request.
- kind: first (attempt 1), retry (the client sent the same logical request again because an earlier
  attempt failed), rerun (the application ran the same operation again after it had succeeded: no
  retry), independent (a new logical request that merely looks like an earlier one).
- origin: for a retry, who retried it in the analyzer's vocabulary (app-retry, agent-retry), or null.
- reexecutes: this call runs, again and with identical arguments, a tool not marked readOnlyHint or
  idempotentHint after an earlier run that completed or may have (the truth for DUPLICATE_EXECUTION).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

META_KEY = "truth"
Kind = Literal["first", "retry", "rerun", "independent"]
KINDS: tuple[str, ...] = get_args(Kind)


@dataclass(frozen=True)
class Label:
    request: str
    attempt: int
    kind: Kind
    origin: str | None = None
    reexecutes: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}; expected one of {KINDS}")
        if self.attempt < 1 or (self.kind in ("retry", "rerun")) != (self.attempt > 1):
            raise ValueError(f"attempt {self.attempt} does not fit kind {self.kind!r}")

    @property
    def key(self) -> str:
        """Unique in the corpus: the logical request and the attempt."""
        return f"{self.request}#{self.attempt}"

    @property
    def previous_key(self) -> str:
        return f"{self.request}#{self.attempt - 1}"

    def meta(self) -> dict[str, Any]:
        """What the driver passes as ``_meta`` on call_tool."""
        return {META_KEY: asdict(self)}

    @classmethod
    def from_params(cls, params: Any) -> Label | None:
        """The label in a tools/call's params, or None if it carries none."""
        meta = params.get("_meta") if isinstance(params, dict) else None
        raw = meta.get(META_KEY) if isinstance(meta, dict) else None
        if not isinstance(raw, dict):
            return None
        return cls(
            request=str(raw["request"]),
            attempt=int(raw["attempt"]),
            kind=raw["kind"],
            origin=raw.get("origin"),
            reexecutes=bool(raw.get("reexecutes", False)),
        )
