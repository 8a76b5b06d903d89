"""The analyzer never raises on any input: every flow is analyzed or skipped with a reason."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.fuzz import properties, strategies

pytestmark = pytest.mark.fuzz


def bounded(examples: int) -> settings:
    """A fixed number of examples from a fixed seed: the same cases on every run, in bounded time."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


@seed(6001)
@bounded(200)
@given(strategies.captures())
def test_random_captures_are_analyzed_or_skipped(flows: strategies.Flows) -> None:
    properties.check_flows(flows)


@seed(6002)
@bounded(80)
@given(st.lists(strategies.http_flows(), min_size=1, max_size=3).map(strategies.Flows), strategies.sse_bodies())
def test_random_event_streams(flows: strategies.Flows, body: bytes) -> None:
    """Every response an event stream, with random framing, line ends, BOMs and invalid UTF-8."""
    properties.check_event_streams(flows, body)


@seed(6005)
@bounded(100)
@given(strategies.retry_captures())
def test_retried_requests(flows: strategies.Flows) -> None:
    """The same request again after failures: retry groups, origins, Retry-After, x-envoy-attempt-count."""
    properties.check_flows(flows)


@seed(6003)
@bounded(150)
@given(strategies.flow_file_bytes())
def test_random_flow_file_bytes(data: bytes) -> None:
    """Records that are flows, almost flows, tnetstring values or noise, broken at the byte level."""
    properties.check_bytes(data)


@seed(6006)
@bounded(60)
@given(strategies.har_files())
def test_random_har_files(data: bytes) -> None:
    properties.check_bytes(data)


@seed(6004)
@bounded(60)
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    properties.check_bytes(data)
