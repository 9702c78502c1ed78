{{/* Names and labels. */}}

{{- define "agentsearch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The base name of every resource: the release name unless overridden. Kept short enough that
"<fullname>-shard-headless" and the shard pods' host names stay valid DNS labels. */}}
{{- define "agentsearch.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "agentsearch.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agentsearch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentsearch.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Labels of a resource; `component` is router, shard or empty for shared resources. */}}
{{- define "agentsearch.labels" -}}
helm.sh/chart: {{ include "agentsearch.chart" .root }}
app.kubernetes.io/name: {{ include "agentsearch.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: agentsearch
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "agentsearch.image" -}}
{{- $image := .Values.image -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "agentsearch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "agentsearch.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "agentsearch.secretName" -}}
{{- default (printf "%s-secrets" (include "agentsearch.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "agentsearch.shardHeadless" -}}
{{- printf "%s-shard-headless" (include "agentsearch.fullname" .) -}}
{{- end -}}

{{/* The routers' shard list: one stable DNS name per StatefulSet pod. */}}
{{- define "agentsearch.shardAddresses" -}}
{{- $fullname := include "agentsearch.fullname" . -}}
{{- $headless := include "agentsearch.shardHeadless" . -}}
{{- $addresses := list -}}
{{- range $i := until (int .Values.shard.replicas) -}}
{{- $addresses = append $addresses (printf "%s-shard-%d.%s.%s.svc.%s:%d" $fullname $i $headless $.Release.Namespace $.Values.clusterDomain (int $.Values.shard.grpcPort)) -}}
{{- end -}}
{{- toJson $addresses -}}
{{- end -}}

{{/* A project UUID as the configuration loader sees it in an environment variable name:
lowercase, without hyphens. The TOML uses the same spelling so both sources name one entry. */}}
{{- define "agentsearch.projectKey" -}}
{{- . | lower | replace "-" "" -}}
{{- end -}}

{{/* TOML rendering. Values arrive as YAML/JSON numbers (float64): a whole number is written as a
TOML integer, which the loader accepts for float keys too; other numbers as floats. */}}

{{- define "agentsearch.toml.key" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . -}}{{ . }}{{- else -}}{{ toJson . }}{{- end -}}
{{- end -}}

{{- define "agentsearch.toml.scalar" -}}
{{- $v := . -}}
{{- if kindIs "string" $v -}}
{{ toJson $v }}
{{- else if kindIs "bool" $v -}}
{{ $v }}
{{- else if or (kindIs "float64" $v) (kindIs "float32" $v) -}}
{{- if eq ($v | int64 | float64) ($v | float64) -}}{{ $v | int64 }}{{- else -}}{{ $v }}{{- end -}}
{{- else if or (kindIs "int" $v) (kindIs "int64" $v) (kindIs "int32" $v) (kindIs "uint64" $v) -}}
{{ $v }}
{{- else if kindIs "slice" $v -}}
[{{ range $i, $e := $v }}{{ if $i }}, {{ end }}{{ include "agentsearch.toml.scalar" $e }}{{ end }}]
{{- else -}}
{{- fail (printf "agentsearch.toml: cannot write %v (%s) as a TOML value" $v (kindOf $v)) -}}
{{- end -}}
{{- end -}}

{{/* A table: its plain keys, then each sub-table as [prefix.key], recursively. */}}
{{- define "agentsearch.toml.table" -}}
{{- $prefix := .prefix -}}
{{- range $k, $v := .table }}
{{- if and (not (kindIs "map" $v)) (not (kindIs "invalid" $v)) }}
{{ include "agentsearch.toml.key" $k }} = {{ include "agentsearch.toml.scalar" $v }}
{{- end }}
{{- end }}
{{- range $k, $v := .table }}
{{- if and (kindIs "map" $v) (not (empty $v)) }}
{{- $name := include "agentsearch.toml.key" $k }}
{{- if $prefix }}{{ $name = printf "%s.%s" $prefix $name }}{{ end }}

[{{ $name }}]
{{- include "agentsearch.toml.table" (dict "prefix" $name "table" $v) }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The router's configuration, as a map. */}}
{{- define "agentsearch.routerConfig" -}}
{{- $v := .Values -}}
{{- $c := deepCopy $v.config -}}
{{- $http := merge (dict "listen" (printf "0.0.0.0:%d" (int $v.router.httpPort))) (default (dict) $c.http) -}}
{{- $postgres := dict "schema" $v.postgres.schema "pool_size" $v.postgres.poolSize "tls_mode" $v.postgres.tls.mode -}}
{{- if $v.postgres.tls.caSecret.name -}}
{{- $_ := set $postgres "ca_file" (printf "/etc/agentsearch/postgres-ca/%s" $v.postgres.tls.caSecret.key) -}}
{{- end -}}
{{- $hydration := deepCopy (default (dict) $c.hydration) -}}
{{- if $v.redis.enabled -}}
{{- $_ := set $hydration "cache" "redis" -}}
{{- if $v.redis.tls.caSecret.name -}}
{{- $_ := set $hydration "redis_ca_file" (printf "/etc/agentsearch/redis-ca/%s" $v.redis.tls.caSecret.key) -}}
{{- end -}}
{{- end -}}
{{- $embed := merge (dict "model_dir" $v.router.modelDir) (default (dict) $c.embed) -}}
{{- $projects := dict -}}
{{- range $id, $p := $v.auth.projects -}}
{{- $key := include "agentsearch.projectKey" $id -}}
{{- $entry := dict -}}
{{- range $name := list "audience" "issuer" -}}
{{- if hasKey $p $name }}{{ $_ := set $entry $name (get $p $name) }}{{ end -}}
{{- end -}}
{{- if hasKey $p "leewaySecs" }}{{ $_ := set $entry "leeway_secs" $p.leewaySecs }}{{ end -}}
{{- if hasKey $p "allowAnonymous" }}{{ $_ := set $entry "allow_anonymous" $p.allowAnonymous }}{{ end -}}
{{- $files := list -}}
{{- range $i, $_ := concat (default list $p.publicKeys) (default list $p.publicKeySecretKeys) -}}
{{- $files = append $files (printf "/etc/agentsearch/jwt/%s-%d.pem" $key $i) -}}
{{- end -}}
{{- if $files }}{{ $_ := set $entry "public_keys" $files }}{{ end -}}
{{- $_ := set $projects $key $entry -}}
{{- end -}}
{{- $config := dict
  "data_dir" "/tmp/agentsearch"
  "grpc" (printf "0.0.0.0:%d" (int $v.router.grpcPort))
  "http" $http
  "server" (dict "drain_secs" $v.router.drainSecs)
  "shards" (dict "remote" (include "agentsearch.shardAddresses" . | fromJsonArray) "refresh_secs" $v.router.shardRefreshSecs "replication" $v.shard.replication "write_quorum" $v.shard.writeQuorum "hedge_after_ms" $v.router.hedgeAfterMs "repair_secs" $v.router.repairSecs "auto_rebalance" $v.router.autoRebalance)
  "postgres" $postgres
  "hydration" $hydration
  "embed" $embed
  "limits" (default (dict) $c.limits)
  "search" (default (dict) $c.search)
  "lexical" (default (dict) $c.lexical)
  "context" (default (dict) $c.context)
  "log" (default (dict) $c.log)
  "telemetry" (default (dict) $c.telemetry)
  "rerank" (default (dict) $c.rerank)
  "plans" (default (dict) $c.plans)
-}}
{{- if $projects -}}
{{- $_ := set $config "auth" (dict "projects" $projects) -}}
{{- end -}}
{{- if $v.router.tlsSecret -}}
{{- $_ := set $config "tls" (dict "cert_file" "/etc/agentsearch/tls/tls.crt" "key_file" "/etc/agentsearch/tls/tls.key") -}}
{{- end -}}
{{- if $v.internalTls.secretName -}}
{{- $shards := get $config "shards" -}}
{{- $_ := set $shards "tls_ca_file" "/etc/agentsearch/internal/ca.crt" -}}
{{- $_ := set $shards "tls_cert_file" "/etc/agentsearch/internal/tls.crt" -}}
{{- $_ := set $shards "tls_key_file" "/etc/agentsearch/internal/tls.key" -}}
{{- if $v.internalTls.serverName -}}
{{- $_ := set $shards "tls_server_name" $v.internalTls.serverName -}}
{{- end -}}
{{- end -}}
{{- toJson $config -}}
{{- end -}}

{{/* A shard's configuration, as a map: what the shard reads, and the same lexical and context
sections as the routers. */}}
{{- define "agentsearch.shardConfig" -}}
{{- $v := .Values -}}
{{- $c := $v.config -}}
{{- $config := dict
  "data_dir" $v.shard.dataDir
  "grpc" (printf "0.0.0.0:%d" (int $v.shard.grpcPort))
  "server" (dict "drain_secs" $v.shard.drainSecs "metrics_listen" (printf "0.0.0.0:%d" (int $v.shard.metricsPort)))
  "limits" (default (dict) $c.limits)
  "lexical" (default (dict) $c.lexical)
  "context" (default (dict) $c.context)
  "log" (default (dict) $c.log)
  "telemetry" (default (dict) $c.telemetry)
-}}
{{- if $v.internalTls.secretName -}}
{{- $_ := set $config "tls" (dict "cert_file" "/etc/agentsearch/internal/tls.crt" "key_file" "/etc/agentsearch/internal/tls.key" "client_ca_file" "/etc/agentsearch/internal/ca.crt" "client_names" (default list $v.internalTls.clientNames)) -}}
{{- end -}}
{{- toJson $config -}}
{{- end -}}

{{/* The configuration files, as TOML text. */}}
{{- define "agentsearch.routerToml" -}}
# agentsearch router, rendered by the Helm chart from its values.
{{ include "agentsearch.toml.table" (dict "prefix" "" "table" (include "agentsearch.routerConfig" . | fromJson)) }}
{{- end -}}

{{- define "agentsearch.shardToml" -}}
# agentsearch shard, rendered by the Helm chart from its values.
{{ include "agentsearch.toml.table" (dict "prefix" "" "table" (include "agentsearch.shardConfig" . | fromJson)) }}
{{- end -}}

{{/* Checksums that roll a role's pods when what they read changes, and only then: a new shard list
rolls the routers, not the shards. The chart's Secret counts whole for the routers; the shards read
only the token from it. */}}
{{- define "agentsearch.routerChecksums" -}}
checksum/config: {{ include "agentsearch.routerToml" . | sha256sum }}
{{- if not .Values.secrets.existingSecret }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- end -}}

{{- define "agentsearch.shardChecksums" -}}
checksum/config: {{ include "agentsearch.shardToml" . | sha256sum }}
{{- if not .Values.secrets.existingSecret }}
checksum/secret: {{ .Values.auth.token | sha256sum }}
{{- end }}
{{- end -}}

{{/* Checks across values that the schema cannot express; each message names the value to set. */}}
{{- define "agentsearch.validate" -}}
{{- $v := .Values -}}
{{- $existing := $v.secrets.existingSecret -}}
{{- if not $existing -}}
{{- if not $v.auth.token -}}
{{- fail "auth.token is required (or secrets.existingSecret with the key secrets.keys.token): routers and shards listen beyond loopback and shards require the service token of the routers" -}}
{{- end -}}
{{- if lt (len $v.auth.token) 16 -}}
{{- fail "auth.token must be at least 16 characters" -}}
{{- end -}}
{{- if and (not $v.postgres.url) (not $v.postgres.host) -}}
{{- fail "postgres.url or postgres.host is required (or secrets.existingSecret holding secrets.keys.postgresUrl): the routers keep their metadata in PostgreSQL" -}}
{{- end -}}
{{- if and $v.redis.enabled (not $v.redis.url) (not $v.redis.host) -}}
{{- fail "redis.enabled needs redis.url or redis.host (or secrets.existingSecret holding secrets.keys.redisUrl)" -}}
{{- end -}}
{{- end -}}
{{- if and $v.postgres.url $v.postgres.host -}}
{{- fail "set either postgres.url or postgres.host, not both" -}}
{{- end -}}
{{- if and $v.redis.url $v.redis.host -}}
{{- fail "set either redis.url or redis.host, not both" -}}
{{- end -}}
{{- if le (int $v.router.terminationGracePeriodSeconds) (int $v.router.drainSecs) -}}
{{- fail "router.terminationGracePeriodSeconds must exceed router.drainSecs, or pods are killed while draining" -}}
{{- end -}}
{{- if gt (int $v.shard.replication) (int $v.shard.replicas) -}}
{{- fail "shard.replication cannot exceed shard.replicas: each integration needs that many distinct shards" -}}
{{- end -}}
{{- if gt (int $v.shard.writeQuorum) (int $v.shard.replication) -}}
{{- fail "shard.writeQuorum cannot exceed shard.replication: no write could succeed" -}}
{{- end -}}
{{- if le (int $v.shard.terminationGracePeriodSeconds) (int $v.shard.drainSecs) -}}
{{- fail "shard.terminationGracePeriodSeconds must exceed shard.drainSecs, or shards are killed while draining" -}}
{{- end -}}
{{- range $id, $p := $v.auth.projects -}}
{{- $hasKey := or $p.hs256Secret $p.hs256SecretKey $p.publicKeys $p.publicKeySecretKeys -}}
{{- if not $hasKey -}}
{{- fail (printf "auth.projects.%s: needs hs256Secret or publicKeys (hs256SecretKey or publicKeySecretKeys with secrets.existingSecret)" $id) -}}
{{- end -}}
{{- if and $existing (or $p.hs256Secret $p.publicKeys) -}}
{{- fail (printf "auth.projects.%s: with secrets.existingSecret the chart creates no Secret; name the keys with hs256SecretKey / publicKeySecretKeys instead of hs256Secret / publicKeys" $id) -}}
{{- end -}}
{{- if and (not $existing) (or $p.hs256SecretKey $p.publicKeySecretKeys) -}}
{{- fail (printf "auth.projects.%s: hs256SecretKey / publicKeySecretKeys name keys of secrets.existingSecret, which is not set" $id) -}}
{{- end -}}
{{- if and $p.hs256Secret (lt (len $p.hs256Secret) 32) -}}
{{- fail (printf "auth.projects.%s.hs256Secret must be at least 32 bytes" $id) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Whether any project has public keys (then the router mounts them). */}}
{{- define "agentsearch.hasPublicKeys" -}}
{{- range $id, $p := .Values.auth.projects -}}
{{- if or $p.publicKeys $p.publicKeySecretKeys }}yes{{ end -}}
{{- end -}}
{{- end -}}

{{/* Pod-level security context shared by both roles. */}}
{{- define "agentsearch.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "agentsearch.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The service token, from the chart's Secret or the existing one. */}}
{{- define "agentsearch.tokenEnv" -}}
- name: AGENTSEARCH_AUTH__TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "agentsearch.secretName" . }}
      key: {{ .Values.secrets.keys.token }}
{{- end -}}

{{/* Each pod names itself in its spans (service.instance.id), so a trace shows which replica
answered. */}}
{{- define "agentsearch.telemetryEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: OTEL_RESOURCE_ATTRIBUTES
  value: "service.instance.id=$(POD_NAME),k8s.pod.name=$(POD_NAME)"
{{- end -}}

{{/* A shard probe: gRPC health on the shard port, or with internal TLS an HTTP path on the
metrics port. */}}
{{- define "agentsearch.shardProbe" -}}
{{- $s := .root.Values.shard -}}
{{- if .root.Values.internalTls.secretName -}}
httpGet:
  path: {{ .path }}
  port: {{ $s.metricsPort }}
{{- else -}}
grpc:
  port: {{ $s.grpcPort }}
{{- end -}}
{{- end -}}

{{- define "agentsearch.topologySpread" -}}
{{- if .values.topologySpread.enabled -}}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: {{ .values.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "agentsearch.selectorLabels" (dict "root" .root "component" .component) | nindent 8 }}
{{- end }}
{{- end -}}
