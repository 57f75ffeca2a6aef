"""The web console without a broker: sessions and their expiry, CSRF tokens, how records are
shown (text, JSON, hex; always escaped), the overview's counts, the login flow and its cookies,
and a refused action answered 403 before any Kafka request (the cluster here is unreachable).
Pages that read the cluster are tested in a real browser in ``tests/integration/console``."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from strata.admin import credentials as creds
from strata.admin.app import create_app
from strata.admin.authentication import AuthSettings
from strata.admin.authorization import AclCache
from strata.admin.console import csrf
from strata.admin.console import topics as console_topics
from strata.admin.console.overview import PartitionState, summarize
from strata.admin.console.record_view import RawRecord, View, matches, ms_time, show
from strata.admin.console.records import Page, parse_timestamp
from strata.admin.console.session import SessionStore
from strata.admin.console.web import environment, safe_next
from strata.admin.kafka_gateway import AdminSettings
from strata.client.kafka_errors import KafkaClientError
from strata.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

SCRIPT = "<script>alert(1)</script>"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _TopicsClient:
    """``list_topics`` answers without the topic ``hidden`` times, then with it."""

    def __init__(self, hidden: int) -> None:
        self.hidden = hidden
        self.asked = 0

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        self.asked += 1
        if self.asked <= self.hidden:
            return SimpleNamespace(topics={})
        return SimpleNamespace(topics={topic: SimpleNamespace(topic=topic, error=None,
                                                              partitions={})})


def _gateway(client: _TopicsClient) -> Any:
    return SimpleNamespace(kafka=SimpleNamespace(client=client),
                           settings=SimpleNamespace(timeout_s=5.0))


def test_a_topic_page_looks_again_for_a_topic_the_metadata_does_not_show_yet() -> None:
    """A topic just created reaches every broker a moment after CreateTopics answered: the
    page asks again (a broker still behind answers without it) and finds it; a topic that
    does not appear within ``UNKNOWN_TOPIC_WAIT_S`` is UNKNOWN_TOPIC_OR_PARTITION."""
    clock = Clock()

    def sleep(seconds: float) -> None:
        clock.now += seconds

    client = _TopicsClient(hidden=3)
    found = console_topics._topic_metadata(_gateway(client), "new", monotonic=clock,
                                           sleep=sleep)
    assert found.topic == "new" and client.asked == 4
    assert clock.now == pytest.approx(100.0 + 3 * console_topics.UNKNOWN_TOPIC_BACKOFF_S)
    never = _TopicsClient(hidden=10_000)
    start = clock.now
    with pytest.raises(KafkaClientError) as raised:
        console_topics._topic_metadata(_gateway(never), "typo", monotonic=clock, sleep=sleep)
    assert raised.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert clock.now - start <= console_topics.UNKNOWN_TOPIC_WAIT_S
    assert never.asked >= console_topics.UNKNOWN_TOPIC_WAIT_S \
        / console_topics.UNKNOWN_TOPIC_BACKOFF_S - 1


# ------------------------------------------------------------------------------ pure parts
def test_sessions_expire_at_their_ttl_and_are_bounded() -> None:
    clock = Clock()
    store = SessionStore(ttl_s=60, max_sessions=2, clock=clock)
    first = store.create("User:a")
    assert store.get(first.id) == first and first.csrf_token != first.id
    clock.now += 59.9
    assert store.get(first.id) == first
    clock.now += 0.1
    assert store.get(first.id) is None and len(store) == 0
    a, b, c = store.create(None), store.create("User:b"), store.create("User:c")
    assert store.get(a.id) is None and store.get(b.id) == b and store.get(c.id) == c
    store.delete(b.id)
    assert store.get(b.id) is None and store.get("") is None and store.get(None) is None


def test_csrf_tokens_must_match_exactly() -> None:
    token = csrf.new_token()
    assert csrf.valid(token, token)
    assert not csrf.valid(token, token[:-1]) and not csrf.valid(token, None)
    assert not csrf.valid(None, None) and not csrf.valid("", "")
    with pytest.raises(csrf.CsrfError):
        csrf.check(token, "forged")


def test_records_are_shown_as_text_json_or_hex() -> None:
    assert show(b'{"a":[1,2]}', View.JSON) == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert show(b"not json", View.JSON) == "not json"
    assert show(b"\x00\xffA", View.HEX) == "00 ff 41"
    assert show(b"caf\xc3\xa9 \xff", View.TEXT) == "café \ufffd"
    assert show(None, View.TEXT) is None
    assert ms_time(0) == "1970-01-01T00:00:00.000Z" and ms_time(-1) == "-"
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T22:13:20") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T23:13:20+01:00") == 1_700_000_000_000


def test_filters_keep_records_whose_text_contains_them() -> None:
    record = RawRecord(0, 17, 0, "CreateTime", b"key-17", b'{"n": 17}',
                       [("source", b"test"), ("empty", None)])
    assert matches(record) and matches(record, key_filter="key-1")
    assert matches(record, value_filter='"n": 17', header_filter="source=te")
    assert matches(record, header_filter="empty=")
    assert not matches(record, key_filter="key-18")
    assert not matches(record, header_filter="source=x")
    assert not matches(RawRecord(0, 0, 0, "CreateTime", None, None, []), key_filter="k")


def test_the_overview_counts_leaders_replicas_and_unhealthy_partitions() -> None:
    summary = summarize({
        "a": [PartitionState(0, (0, 1, 2), (0, 1, 2)), PartitionState(1, (1, 2, 0), (1, 2))],
        "b": [PartitionState(-1, (2,), ())],
    })
    assert (summary.topics, summary.partitions) == (2, 3)
    assert (summary.under_replicated, summary.offline) == (2, 1)
    assert summary.leaders_by_broker == {0: 1, 1: 1}
    assert summary.replicas_by_broker == {0: 2, 1: 2, 2: 3}


def test_after_login_only_console_paths_are_followed() -> None:
    assert safe_next("/console/topics?q=a") == "/console/topics?q=a"
    for bad in ("https://evil.test/console/", "//evil.test/", "/docs", "/console/login",
                "/console\\..", None, ""):
        assert safe_next(bad) == "/console/"


def test_record_contents_are_escaped_in_the_page() -> None:
    record = RawRecord(0, 0, 0, "CreateTime", SCRIPT.encode(), SCRIPT.encode(),
                       [(SCRIPT, SCRIPT.encode())])
    html = environment.get_template("records.html").render(
        request=None, principal=None, csrf_token="t", logged_in=False, prefix="/console",
        section="topics", topic="t", page=Page([0], 0, 1, [record], 1), partition=0,
        seek="offset", offset="", timestamp="", limit=50, key=SCRIPT, value="", header="",
        view="text", views=["text"], may_write=True, tail=False)
    assert "<script>alert" not in html
    # key, value, header name and value, the key filter field
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 5


# ------------------------------------------------------------------------------ the app
FAST = 1000


def _app_with_auth() -> httpx.AsyncClient:
    credentials = creds.AdminCredentials.parse({"v": 1, "users": [
        {"username": "carol", "password": creds.hash_password("carol-pw", FAST)}]})
    settings = AuthSettings(credentials)
    app = create_app(AdminSettings("127.0.0.1:1", 1.0, auth=settings))
    bindings = [AclBinding(ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL),
                           AccessControlEntry("User:carol", "*", AclOperation.DESCRIBE,
                                              AclPermissionType.ALLOW))]

    async def fetch() -> list[AclBinding]:
        return bindings

    app.state.acl_cache = AclCache(fetch, settings)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                             base_url="http://admin.test")


@pytest.fixture
async def console() -> AsyncIterator[httpx.AsyncClient]:
    async with _app_with_auth() as client:
        yield client


def _hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, name
    return found.group(1)


async def test_login_redirects_sets_strict_cookies_and_checks_every_form(
        console: httpx.AsyncClient) -> None:
    sent = await console.get("/console/topics?q=a")
    assert sent.status_code == 303
    assert sent.headers["location"] == "/console/login?next=/console/topics%3Fq%3Da"
    form = await console.get(sent.headers["location"])
    assert form.status_code == 200
    token, next_url = _hidden(form.text, "csrf_token"), _hidden(form.text, "next")
    assert next_url == "/console/topics?q=a"
    login_cookie = form.headers["set-cookie"]
    assert "HttpOnly" in login_cookie and "SameSite=strict" in login_cookie

    forged = await console.post("/console/login", data={
        "csrf_token": "forged", "username": "carol", "password": "carol-pw"})
    assert forged.status_code == 403 and "CSRF_TOKEN_INVALID" in forged.text
    wrong = await console.post("/console/login", data={
        "csrf_token": token, "username": "carol", "password": "nope"})
    assert wrong.status_code == 401 and "AUTHENTICATION_FAILED" in wrong.text
    token = _hidden(wrong.text, "csrf_token")
    done = await console.post("/console/login", data={
        "csrf_token": token, "next": next_url, "username": "carol", "password": "carol-pw"})
    assert done.status_code == 303 and done.headers["location"] == "/console/topics?q=a"
    session_cookie = next(c for c in done.headers.get_list("set-cookie")
                          if c.startswith("strata_console="))
    for attribute in ("HttpOnly", "SameSite=strict", "Path=/console"):
        assert attribute in session_cookie
    assert "Secure" not in session_cookie  # plain HTTP here; HTTPS adds it

    # Carol may Describe topics but not Delete them: 403 before any Kafka request.
    session = console.cookies.get("strata_console")
    assert session
    # the ASGI transport keeps the app; its session store holds the form token
    store = console._transport.app.state.console_sessions  # type: ignore[attr-defined]
    csrf_token = store.get(session).csrf_token
    refused = await console.post("/console/topics/orders/delete",
                                 data={"csrf_token": csrf_token, "confirm": "orders"})
    assert refused.status_code == 403 and "TOPIC_AUTHORIZATION_FAILED" in refused.text
    assert "text/html" in refused.headers["content-type"]
    for path, form in (("/console/brokers/0/configs", {"set_name": "x", "set_value": "1"}),
                       ("/console/reassignments", {"topic": "orders", "partition": "0",
                                                   "replicas": "1"}),
                       ("/console/reassignments/cancel", {"topic": "orders", "partition": "0"}),
                       ("/console/elections", {"topic": "orders"})):
        refused = await console.post(path, data={"csrf_token": csrf_token, **form})
        assert refused.status_code == 403 and "CLUSTER_AUTHORIZATION_FAILED" in refused.text
    no_token = await console.post("/console/topics/orders/delete", data={"confirm": "orders"})
    assert no_token.status_code == 403 and "CSRF_TOKEN_INVALID" in no_token.text
    bad_query = await console.get("/console/topics/orders/records?partition=x")
    assert bad_query.status_code == 422 and "VALIDATION_ERROR" in bad_query.text

    out = await console.post("/console/logout", data={"csrf_token": csrf_token})
    assert out.status_code == 303 and out.headers["location"] == "/console/login"
    assert store.get(session) is None


async def test_without_authentication_there_is_no_login() -> None:
    app = create_app(AdminSettings("127.0.0.1:1", 1.0))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://admin.test") as client:
        login = await client.get("/console/login")
        assert login.status_code == 303 and login.headers["location"] == "/console/"
        static = await client.get("/console/static/console.js")
        assert static.status_code == 200 and "confirm" in static.text
        basic = base64.b64encode(b"x:y").decode()
        unreachable = await client.get("/console/", headers={"Authorization": f"Basic {basic}"})
        assert unreachable.status_code == 503 and "CLUSTER_UNREACHABLE" in unreachable.text
        assert "text/html" in unreachable.headers["content-type"]
