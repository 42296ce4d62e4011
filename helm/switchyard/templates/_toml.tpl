{{/*
TOML rendering for the node config.

Helm's own `toToml` turns every number into a float (`30000.0`) because values arrive as
JSON numbers, and the node's config loader rejects floats for integer keys. These helpers
write integral numbers as integers and keep everything else as TOML expects:
  - scalars and lists of scalars as `key = value`;
  - maps as `[a.b]` tables, lists of maps as `[[a.b]]` arrays of tables;
  - maps inside lists of scalars are not expected in the config and render inline;
  - null values are dropped (Helm's way to delete a default).
*/}}

{{- define "switchyard.toml.key" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . -}}{{ . }}{{- else -}}{{ toJson . }}{{- end -}}
{{- end -}}

{{- define "switchyard.toml.value" -}}
{{- $v := . -}}
{{- if kindIs "string" $v -}}{{ toJson $v }}
{{- else if kindIs "bool" $v -}}{{ ternary "true" "false" $v }}
{{- else if or (kindIs "float64" $v) (kindIs "float32" $v) -}}
{{- if eq (float64 (int64 $v)) (float64 $v) -}}{{ int64 $v }}{{- else -}}{{ $v }}{{- end -}}
{{- else if or (kindIs "int" $v) (kindIs "int64" $v) (kindIs "int32" $v) (kindIs "uint64" $v) -}}{{ $v }}
{{- else if kindIs "slice" $v -}}
[{{- range $i, $e := $v -}}{{- if $i -}}, {{ end -}}{{ include "switchyard.toml.value" $e }}{{- end -}}]
{{- else if kindIs "map" $v -}}
{ {{- $first := true -}}{{- range $k := keys $v | sortAlpha -}}{{- $e := get $v $k -}}{{- if not (kindIs "invalid" $e) -}}{{- if not $first -}}, {{ else }} {{ end -}}{{- $first = false -}}{{ include "switchyard.toml.key" $k }} = {{ include "switchyard.toml.value" $e }}{{- end -}}{{- end }} }
{{- else -}}
{{- fail (printf "config: cannot write %v (%s) as TOML" $v (kindOf $v)) -}}
{{- end -}}
{{- end -}}

{{/* Is this value a non-empty list whose every element is a map (an array of tables)? */}}
{{- define "switchyard.toml.isTableArray" -}}
{{- if and (kindIs "slice" .) (gt (len .) 0) -}}
{{- $all := true -}}{{- range . -}}{{- if not (kindIs "map" .) -}}{{- $all = false -}}{{- end -}}{{- end -}}
{{- if $all -}}yes{{- end -}}
{{- end -}}
{{- end -}}

{{/* A table's body: {"prefix": "a.b" or "", "table": map}. */}}
{{- define "switchyard.toml.table" -}}
{{- $prefix := .prefix -}}
{{- $t := .table -}}
{{- range $k := keys $t | sortAlpha -}}
{{- $v := get $t $k -}}
{{- if and (not (kindIs "invalid" $v)) (not (kindIs "map" $v)) (not (include "switchyard.toml.isTableArray" $v)) }}
{{ include "switchyard.toml.key" $k }} = {{ include "switchyard.toml.value" $v }}
{{- end -}}
{{- end -}}
{{- range $k := keys $t | sortAlpha -}}
{{- $v := get $t $k -}}
{{- $path := ternary (include "switchyard.toml.key" $k) (printf "%s.%s" $prefix (include "switchyard.toml.key" $k)) (eq $prefix "") -}}
{{- if kindIs "map" $v }}

[{{ $path }}]
{{- include "switchyard.toml.table" (dict "prefix" $path "table" $v) -}}
{{- else if include "switchyard.toml.isTableArray" $v -}}
{{- range $e := $v }}

[[{{ $path }}]]
{{- include "switchyard.toml.table" (dict "prefix" $path "table" $e) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
