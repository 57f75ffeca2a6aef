{{/* Helpers of the strata chart; every name is namespaced strata.* */}}

{{- define "strata.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "strata.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "strata.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: name and instance only (they never change). */}}
{{- define "strata.selectorLabels" -}}
app.kubernetes.io/name: {{ include "strata.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Standard labels; pass a dict with "ctx" (the root) and "component". */}}
{{- define "strata.labels" -}}
helm.sh/chart: {{ include "strata.chart" .ctx }}
{{ include "strata.selectorLabels" .ctx }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: strata
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- end -}}

{{- define "strata.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "strata.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "strata.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Whether a broker listener authenticates its clients (SASL or client certificates). */}}
{{- define "strata.listenerAuthenticates" -}}
{{- if ne (dig "authentication" "type" "none" .) "none" }}true{{ end -}}
{{- end -}}

{{/* The listener status.bootstrapServers names (the operator's rule, BrokerSpec
.bootstrap_listener): among the listeners that authenticate, if any, else among all:
"plaintext" if there, else the lowest port. */}}
{{- define "strata.clientListener" -}}
{{- $pool := list -}}
{{- range .Values.broker.listeners -}}
{{- if include "strata.listenerAuthenticates" . }}{{ $pool = append $pool . }}{{ end -}}
{{- end -}}
{{- if not $pool }}{{ $pool = .Values.broker.listeners }}{{ end -}}
{{- $chosen := first $pool -}}
{{- range $pool -}}
{{- if lt (int .port) (int $chosen.port) }}{{ $chosen = . }}{{ end -}}
{{- end -}}
{{- range $pool -}}
{{- if eq .name "plaintext" }}{{ $chosen = . }}{{ end -}}
{{- end -}}
{{- toJson $chosen -}}
{{- end -}}

{{/* host:port of the client Service the operator creates for broker.name. */}}
{{- define "strata.bootstrapServers" -}}
{{- $listener := include "strata.clientListener" . | fromJson -}}
{{- printf "%s-bootstrap.%s.svc:%d" .Values.broker.name .Release.Namespace (int $listener.port) -}}
{{- end -}}

{{/* The kopf peering object's name (several operator replicas elect a leader through it). */}}
{{- define "strata.peeringName" -}}
{{- default (include "strata.fullname" .) .Values.operator.peeringName -}}
{{- end -}}

{{/* RBAC rules on namespaced resources: in the ClusterRole when every namespace is watched,
else in a Role per watched namespace (operator/DESIGN.md, RBAC). */}}
{{- define "strata.namespacedRules" -}}
  # Our resources: watched, patched (kopf's finalizer and annotations), status written.
  - apiGroups: ["strata.dev"]
    resources: ["brokers", "topics", "users", "rebalances"]
    verbs: ["get", "list", "watch", "patch"]
  - apiGroups: ["strata.dev"]
    resources: ["brokers/status", "topics/status", "users/status", "rebalances/status"]
    verbs: ["get", "patch"]
  # Events about Brokers and Topics (rolls, scaling, resizes, refusals), and kopf's own.
  - apiGroups: ["", "events.k8s.io"]
    resources: ["events"]
    verbs: ["create", "patch"]
  # What a Broker owns.
  - apiGroups: [""]
    resources: ["configmaps", "services"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  - apiGroups: ["apps"]
    resources: ["statefulsets", "deployments"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  - apiGroups: ["policy"]
    resources: ["poddisruptionbudgets"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  # Rolling restarts delete broker pods; rack awareness annotates them from their node.
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["get", "list", "watch", "patch", "delete"]
  # storage.size raised: each broker claim's request is patched (never created: the
  # StatefulSet controller makes them); JBOD volumes with deleteClaim among others that keep
  # theirs: owned by the Broker (patch), deleted with their scaled-away broker.
  - apiGroups: [""]
    resources: ["persistentvolumeclaims"]
    verbs: ["get", "list", "patch", "delete"]
  # A secured Broker: the operator logs in to its cluster with the inter-broker password and
  # the TLS Secret's CA, and reads Users' password Secrets (by name; never listed). A User
  # without passwordSecret gets a generated one: created, and deleted with the User.
  # Operator-made certificates: the CA and certificate Secrets are created and patched (a
  # CA rotation, a new broker's certificate, a TLS User's certificate).
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get", "create", "patch", "delete"]
  # tls.certManager: the brokers' cert-manager Certificate.
  - apiGroups: ["cert-manager.io"]
    resources: ["certificates"]
    verbs: ["get", "create", "patch"]
  # kopf peering between operator replicas (one works, the others stand by).
  - apiGroups: ["kopf.dev"]
    resources: ["kopfpeerings"]
    verbs: ["get", "list", "watch", "patch"]
{{- end -}}
