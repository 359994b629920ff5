"""The live server every test talks to: `scripts/http_api_test.sh` starts it and names it with
QUORUM_TARGET (gRPC host:port), QUORUM_HTTP (http://host:port) and QUORUM_TOKEN; without them
the tests fail."""

import os

import pytest


def _required(name: str, what: str) -> str:
    value = os.environ.get(name)
    assert value, f"set {name} ({what})"
    return value


@pytest.fixture(scope="module")
def target() -> str:
    return _required("QUORUM_TARGET", "host:port of a running quorum serve")


@pytest.fixture(scope="module")
def base_url() -> str:
    return _required("QUORUM_HTTP", "http://host:port of the server's HTTP port")


@pytest.fixture(scope="module")
def token() -> str:
    return _required("QUORUM_TOKEN", "the server's bearer token")
