{{/* Names, labels and the values every template derives from. */}}

{{- define "switchyard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "switchyard.fullname" -}}
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

{{- define "switchyard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "switchyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: switchyard
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "node") */}}
{{- define "switchyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchyard.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "switchyard.componentLabels" -}}
{{ include "switchyard.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "switchyard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "switchyard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "switchyard.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "switchyard.redisName" -}}
{{- printf "%s-redis" (include "switchyard.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Redis URL written into the config (never with a password); a Secret, or the ACL
password, makes the pods' SWITCHYARD_REDIS_URL override it. */}}
{{- define "switchyard.redisUrl" -}}
{{- $sentinel := and .Values.redis.sentinel.masterName (gt (len .Values.redis.sentinel.hosts) 0) -}}
{{- if and (or .Values.redis.sentinel.masterName .Values.redis.sentinel.hosts) (not $sentinel) -}}
{{- fail "redis.sentinel: set both hosts and masterName" -}}
{{- end -}}
{{- $cluster := gt (len .Values.redis.cluster.nodes) 0 -}}
{{- $external := or .Values.redis.url .Values.redis.existingSecret -}}
{{- if and $sentinel (or $external .Values.redis.bundled.enabled $cluster) -}}
{{- fail "redis: set redis.sentinel or redis.cluster or redis.url / redis.existingSecret or redis.bundled.enabled, only one" -}}
{{- end -}}
{{- if and $cluster (or $external .Values.redis.bundled.enabled) -}}
{{- fail "redis: set redis.cluster or redis.url / redis.existingSecret or redis.bundled.enabled, only one" -}}
{{- end -}}
{{- if and $external .Values.redis.bundled.enabled -}}
{{- fail "redis: set either redis.url / redis.existingSecret (external Redis) or redis.bundled.enabled=true (trials only), not both" -}}
{{- end -}}
{{- if and .Values.redis.acl.username .Values.redis.existingSecret -}}
{{- fail "redis.acl: with redis.existingSecret put the user and password in that URL instead" -}}
{{- end -}}
{{- if and .Values.redis.acl.username (not .Values.redis.acl.existingSecret) -}}
{{- fail "redis.acl: set acl.existingSecret (the user's password) with acl.username" -}}
{{- end -}}
{{- if $sentinel -}}
{{- printf "%s://%s/%s/%d" (ternary "rediss+sentinel" "redis+sentinel" .Values.redis.sentinel.tls) (join "," .Values.redis.sentinel.hosts) .Values.redis.sentinel.masterName (int64 .Values.redis.sentinel.db) -}}
{{- else if $cluster -}}
{{- printf "%s://%s/" (ternary "rediss+cluster" "redis+cluster" .Values.redis.cluster.tls) (join "," .Values.redis.cluster.nodes) -}}
{{- else if .Values.redis.url -}}
{{- .Values.redis.url -}}
{{- else if .Values.redis.bundled.enabled -}}
{{- printf "redis://%s.%s.svc:6379/0" (include "switchyard.redisName" .) .Release.Namespace -}}
{{- else if .Values.redis.existingSecret -}}
{{- /* Placeholder for the config check; SWITCHYARD_REDIS_URL from the Secret replaces it. */ -}}
redis://redis-url-from-secret:6379/0
{{- else -}}
{{- fail "redis: set redis.url, redis.sentinel, redis.cluster or redis.existingSecret (an external Redis), or redis.bundled.enabled=true for a trial" -}}
{{- end -}}
{{- end -}}

{{/* The pods' Redis URL with the ACL user; Kubernetes expands $(SWITCHYARD_REDIS_ACL_PASSWORD)
from the env var defined before it, so the password never appears in a manifest. */}}
{{- define "switchyard.redisUrlWithAcl" -}}
{{- $url := include "switchyard.redisUrl" . -}}
{{- regexReplaceAll "^([a-z+]+)://" $url (printf "${1}://%s:$(SWITCHYARD_REDIS_ACL_PASSWORD)@" .Values.redis.acl.username) -}}
{{- end -}}

{{/* The ACL rule of the nodes' user (docs/cluster.md), without its password. */}}
{{- define "switchyard.redisAclRule" -}}
{{- $p := .Values.cluster.keyPrefix -}}
{{- printf "resetkeys resetchannels ~%s* &%sevents -@all +@connection +@read +@write +@scripting +@pubsub +time +wait -@dangerous" $p $p -}}
{{- end -}}

{{/* terminationGracePeriodSeconds: preStop sleep + shutdown grace (rounded up) + margin. */}}
{{- define "switchyard.node.terminationGrace" -}}
{{- $grace := div (add (int64 .Values.node.shutdownGraceMs) 999) 1000 -}}
{{- add (int64 .Values.node.preStopSleepSeconds) $grace (int64 .Values.node.terminationGraceMarginSeconds) -}}
{{- end -}}

{{/* The node config as a map: the user's `config` plus the keys the chart owns. */}}
{{- define "switchyard.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $server := default dict (get $cfg "server") -}}
{{- $_ := set $server "listen" (printf "0.0.0.0:%d" (int64 .Values.node.ports.client)) -}}
{{- $_ := set $server "admin_listen" (printf "0.0.0.0:%d" (int64 .Values.node.ports.admin)) -}}
{{- $_ := set $server "shutdown_grace_ms" (int64 .Values.node.shutdownGraceMs) -}}
{{- $_ := set $cfg "server" $server -}}
{{- $auth := default dict (get $cfg "auth") -}}
{{- $_ := set $auth "management_key_env" (ternary "SWITCHYARD_MANAGEMENT_KEY" "" (ne .Values.secrets.management.existingSecret "")) -}}
{{- $_ := set $cfg "auth" $auth -}}
{{- $cluster := dict "mode" "redis" "redis_url" (include "switchyard.redisUrl" .) "key_prefix" .Values.cluster.keyPrefix "heartbeat_interval_ms" .Values.cluster.heartbeatIntervalMs "node_ttl_ms" .Values.cluster.nodeTtlMs "redis_timeout_ms" .Values.cluster.redisTimeoutMs -}}
{{- $_ := set $cfg "cluster" $cluster -}}
{{- toJson $cfg -}}
{{- end -}}

{{- define "switchyard.configToml" -}}
# Rendered by the Helm chart from its `config` values; do not edit in the cluster.
{{- include "switchyard.toml.table" (dict "prefix" "" "table" (include "switchyard.config" . | fromJson)) }}
{{ end -}}

{{/* Environment shared by nodes and coordinator: management key and Redis URL. */}}
{{- define "switchyard.commonEnv" -}}
{{- if .Values.secrets.management.existingSecret }}
- name: SWITCHYARD_MANAGEMENT_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.secrets.management.existingSecret }}
      key: {{ .Values.secrets.management.key }}
{{- end }}
{{- if .Values.redis.existingSecret }}
- name: SWITCHYARD_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.existingSecret }}
      key: {{ .Values.redis.existingSecretKey }}
{{- end }}
{{- if .Values.redis.acl.username }}
- name: SWITCHYARD_REDIS_ACL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.acl.existingSecret }}
      key: {{ .Values.redis.acl.passwordKey }}
- name: SWITCHYARD_REDIS_URL
  value: {{ include "switchyard.redisUrlWithAcl" . | quote }}
{{- end }}
{{- end -}}

{{/* Soft or hard anti-affinity by hostname for a component. */}}
{{- define "switchyard.antiAffinity" -}}
{{- if eq .mode "hard" }}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "switchyard.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 10 }}
{{- else if eq .mode "soft" }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "switchyard.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 12 }}
{{- end }}
{{- end -}}
