"""A load that met error responses measured an error page, not the servlet (the lab's runs of
2026-12-06 measured HTTP 403s from the examples webapp's RemoteAddrValve): a live step fails on it,
with the cause and the check; the replay flags it and gives it no verdict (tests/test_verdicts.py)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from conftest import FIXTURES
from tunepath.errors import TunepathError
from tunepath.live.actions import refused_load
from tunepath.parse.wrk import parse_file

pytestmark = pytest.mark.fast
URL = "http://10.0.0.1:8080/examples/servlets/servlet/HelloWorldExample"


def test_a_measurement_of_error_responses_fails_its_step_and_says_how_to_check():
    refused = parse_file(FIXTURES / "wrk2" / "notfound_404.txt")
    session = SimpleNamespace(server=SimpleNamespace(name="srv"))
    with pytest.raises(TunepathError) as caught:
        refused_load(session, "tls/http", [refused], URL)
    said = str(caught.value)
    assert said.startswith(f"tls/http: {refused.non_2xx_3xx:,} of {refused.requests:,} responses were HTTP errors")
    assert f"curl -s -o /dev/null -w '%{{http_code}}' {URL}" in said and "403" in said
    fine = replace(refused, non_2xx_3xx=refused.requests // 100)       # 1 %: a few errors, still the servlet
    assert not fine.errors
    refused_load(session, "tls/http", [fine], URL)
