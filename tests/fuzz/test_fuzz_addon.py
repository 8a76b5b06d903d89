"""The addon's hooks and stream callable never raise and always forward the bytes they were given.

Driven as mitmproxy drives them (responseheaders, then the stream callable chunk by chunk, then response,
error or done), with random request and response headers, bodies and chunk sequences. A hook that
swallowed an exception (it logs "traffic is unaffected") fails the property too.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.fuzz import properties, strategies

pytestmark = pytest.mark.fuzz


@seed(6101)
@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(strategies.hook_runs())
def test_hooks_never_raise_and_forward_every_byte(run: properties.HookRun) -> None:
    properties.check_hooks(run)
