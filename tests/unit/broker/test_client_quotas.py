"""Client quota configuration: entities, Describe filters, alterations and Kafka's resolution
order, as Kafka's ClientQuotaControlManager and ClientQuotasImage answer them."""

from __future__ import annotations

import pytest

from strata.broker.quotas.client_quotas import (
    CLIENT_ID,
    IP,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    Alteration,
    ClientQuotas,
    FilterComponent,
    QuotaRequestError,
    entity,
)


@pytest.mark.parametrize(("pairs", "message"), [
    ([], "Invalid empty client quota entity"),
    ([(USER, "a"), (USER, "b")], "duplicate entity entry user"),
    ([("group", "g")], "Unhandled client quota entity type: group"),
    ([(USER, "")], "Empty user not supported"),
    ([(IP, "10.0.0.1"), (USER, "a")], "Invalid empty client quota entity"),
    ([(IP, "not-an-ip")], "not-an-ip is not a valid IP"),
])
def test_invalid_entities_are_refused(pairs: list[tuple[str, str | None]], message: str) -> None:
    with pytest.raises(QuotaRequestError, match=message):
        entity(pairs)


def test_an_entity_is_sorted_by_type_and_none_is_the_default() -> None:
    assert entity([(USER, "alice"), (CLIENT_ID, None)]) == ((CLIENT_ID, None), (USER, "alice"))


def _quotas() -> ClientQuotas:
    quotas, errors = ClientQuotas().alter([
        Alteration([(USER, "alice")], {PRODUCER_BYTE_RATE: 1000}),
        Alteration([(USER, "alice"), (CLIENT_ID, "app")], {PRODUCER_BYTE_RATE: 500}),
        Alteration([(USER, None)], {PRODUCER_BYTE_RATE: 100}),
        Alteration([(CLIENT_ID, "app")], {REQUEST_PERCENTAGE: 50.5}),
        Alteration([(CLIENT_ID, None)], {PRODUCER_BYTE_RATE: 10}),
    ])
    assert errors == [None] * 5
    return quotas


def test_alterations_are_validated_per_entry_and_removing_every_key_removes_the_entity() -> None:
    quotas, errors = _quotas().alter([
        Alteration([(USER, "bob")], {PRODUCER_BYTE_RATE: 1.5}),
        Alteration([(USER, "bob")], {"bogus_rate": 1}),
        Alteration([(IP, "10.0.0.1")], {PRODUCER_BYTE_RATE: 1}),
        Alteration([(USER, None)], {PRODUCER_BYTE_RATE: None}),
    ])
    assert [str(e) if e else None for e in errors] == [
        "Configuration producer_byte_rate must be a Long value",
        "Invalid configuration key bogus_rate",
        "Invalid configuration key producer_byte_rate",
        None,
    ]
    assert ((USER, "bob"),) not in quotas.entries
    assert ((USER, None),) not in quotas.entries
    assert quotas.entries[((USER, "alice"),)] == {PRODUCER_BYTE_RATE: 1000.0}


def _described(components: list[FilterComponent], strict: bool) -> list[object]:
    return [e for e, _ in _quotas().describe(components, strict)]


def test_describe_filters_match_as_kafkas() -> None:
    alice = FilterComponent(USER, MATCH_EXACT, "alice")
    assert _described([alice], strict=True) == [((USER, "alice"),)]
    assert _described([alice], strict=False) == [((CLIENT_ID, "app"), (USER, "alice")),
                                                 ((USER, "alice"),)]
    assert _described([FilterComponent(USER, MATCH_DEFAULT)], strict=True) == [((USER, None),)]
    assert _described([FilterComponent(CLIENT_ID, MATCH_SPECIFIED)], strict=True) == [
        ((CLIENT_ID, None),), ((CLIENT_ID, "app"),)]
    assert len(_described([], strict=False)) == 5
    assert _described([], strict=True) == []


@pytest.mark.parametrize(("components", "error_name"), [
    ([FilterComponent("group", MATCH_SPECIFIED)], "UNSUPPORTED_VERSION"),
    ([FilterComponent(USER, MATCH_EXACT)], "INVALID_REQUEST"),
    ([FilterComponent(USER, MATCH_DEFAULT, "x")], "INVALID_REQUEST"),
    ([FilterComponent(USER, MATCH_SPECIFIED), FilterComponent(USER, MATCH_DEFAULT)],
     "INVALID_REQUEST"),
    ([FilterComponent(IP, MATCH_SPECIFIED), FilterComponent(USER, MATCH_SPECIFIED)],
     "INVALID_REQUEST"),
    ([FilterComponent(USER, 7)], "INVALID_REQUEST"),
])
def test_bad_filters_are_refused(components: list[FilterComponent], error_name: str) -> None:
    with pytest.raises(QuotaRequestError) as refused:
        _quotas().describe(components, strict=False)
    assert refused.value.error_name == error_name


def test_resolution_walks_kafkas_eight_levels_and_names_the_shared_sensor() -> None:
    quotas = _quotas()

    def pick(key: str, user: str, client_id: str) -> tuple[float | None, str, str]:
        found = quotas.resolve(key, user, client_id)
        return found.limit, found.user_tag, found.client_id_tag

    # user + client-id first, then the user's own quota (shared by all the user's clients)
    assert pick(PRODUCER_BYTE_RATE, "alice", "app") == (500.0, "alice", "app")
    assert pick(PRODUCER_BYTE_RATE, "alice", "other") == (1000.0, "alice", "")
    # the default user comes before any client-id quota
    assert pick(PRODUCER_BYTE_RATE, "bob", "app") == (100.0, "bob", "")
    assert pick(REQUEST_PERCENTAGE, "bob", "app") == (50.5, "", "app")
    assert pick(REQUEST_PERCENTAGE, "bob", "x") == (None, "", "x")
