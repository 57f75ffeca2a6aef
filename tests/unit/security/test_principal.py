"""Kafka principals from certificates (RFC 2253 subject, most specific first) and SASL."""

from __future__ import annotations

from strata.security.principal import ANONYMOUS, from_certificate, rfc2253, user


def test_subject_in_rfc_2253_order() -> None:
    subject = ((("countryName", "DE"),), (("organizationName", "Strata"),),
               (("organizationalUnitName", "eng"),), (("commonName", "alice"),))
    assert rfc2253(subject) == "CN=alice,OU=eng,O=Strata,C=DE"
    assert from_certificate({"subject": subject}) == "User:CN=alice,OU=eng,O=Strata,C=DE"


def test_special_characters_are_escaped() -> None:
    subject = ((("commonName", "Smith, John"),), (("organizationName", " a+b "),))
    assert rfc2253(subject) == "O=\\ a\\+b\\ ,CN=Smith\\, John"


def test_multi_valued_rdn_and_unknown_attributes() -> None:
    subject = ((("commonName", "x"), ("userId", "7")), (("emailAddress", "a@b"),))
    assert rfc2253(subject) == "1.2.840.113549.1.9.1=a@b,CN=x+UID=7"


def test_no_certificate_is_anonymous() -> None:
    assert from_certificate(None) == ANONYMOUS == "User:ANONYMOUS"
    assert from_certificate({}) == ANONYMOUS
    assert user("alice") == "User:alice"
