"""``strata.operator``: the kopf operator for ``Broker`` and ``Topic`` (API group ``strata.dev``).

Module map (``DESIGN.md`` beside this file has the why):

- ``model``      the CR specs as frozen dataclasses, parsed from the object's ``spec`` with defaults
- ``crds``       the CRDs' OpenAPI schemas, printer columns and CEL rules; the chart's
                 ``crds/*.yaml`` are generated from it (``python -m strata.operator.crds``)
- ``builders``   pure ``build_*`` functions: Broker -> ConfigMap, Services, StatefulSet, PDB, admin
- ``etcd``       pure ``build_*`` functions for the managed etcd
- ``conditions`` the ``Ready`` condition and status shapes (pure)
- ``rolling``    pure decisions: which pod to restart next, whether a scale-down may shrink
- ``topic_sync`` pure decision: what a Topic needs done in Kafka, and who owns a topic name
- ``kafka``      the Kafka side over the Kafka protocol (confluent-kafka AdminClient)
- ``reassign``   AlterPartitionReassignments with our own codec (not in confluent-kafka)
- ``kube``       the Kubernetes side (the official ``kubernetes`` client): apply, list, patch
- ``broker``     the Broker reconcile (I/O shell around the pure parts)
- ``topic``      the Topic reconcile and deletion
- ``metrics``    operator metrics (Prometheus)
- ``settings``   ``STRATA_OPERATOR_*`` environment settings
- ``main``       only registers kopf handlers
"""
