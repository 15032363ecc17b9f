"""``HEAD /metrics`` over a real socket (issue 30): docs/operations.md says the endpoint answers
GET and HEAD, and /metrics answered HEAD with 405 (prometheus_client's WSGI app takes GET only).
Every path answers HEAD with GET's status and headers, and no body."""
import http.client
from urllib.parse import urlsplit

import pytest

from test_web_server import web_server

pytestmark = pytest.mark.network


def _ask(base, method, path):
    where = urlsplit(base)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    try:
        conn.request(method, path)
        answer = conn.getresponse()
        return answer.status, answer.getheader("content-type"), answer.read()
    finally:
        conn.close()


def test_head_answers_like_get_without_the_body():
    with web_server() as (_server, base):
        for path in ("/metrics", "/", "/api/summary"):
            status, content_type, body = _ask(base, "GET", path)
            assert status == 200 and body, path
            assert _ask(base, "HEAD", path) == (200, content_type, b""), path
        assert b"rocketpy_build_info" in _ask(base, "GET", "/metrics")[2]
