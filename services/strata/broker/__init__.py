"""Strata's broker: the Kafka protocol served on the storage core.

See ``DESIGN.md`` beside this file for the module map and the seams (``RequestContext``,
``BrokerState``, ``Response``, ``Handler``). Run one with ``strata broker --config FILE`` or
``python -m strata.broker``.
"""
