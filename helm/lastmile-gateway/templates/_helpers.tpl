{{- define "lastmile.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lastmile.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "lastmile.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "lastmile.labels" -}}
app.kubernetes.io/name: {{ include "lastmile.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "lastmile.selector" -}}
app.kubernetes.io/name: {{ include "lastmile.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* An image reference: "repository@digest" where a digest pins it (its tag is then ignored: the digest names
the bytes), else "repository:tag". */}}
{{- define "lastmile.imageRef" -}}
{{- if .digest -}}{{ .repository }}@{{ .digest }}{{- else -}}{{ .repository }}:{{ .tag }}{{- end -}}
{{- end -}}

{{- define "lastmile.image" -}}
{{- include "lastmile.imageRef" (dict "repository" .Values.image.repository "tag" (default .Chart.AppVersion .Values.image.tag) "digest" .Values.image.digest) -}}
{{- end -}}

{{- define "lastmile.tritonImage" -}}
{{- include "lastmile.imageRef" .Values.triton.image -}}
{{- end -}}

{{/* A pod's labels: its selector labels, then podLabels (every pod) and the component's own podLabels (the
schema keeps both off the selector's keys). (list $ "component" componentPodLabels) */}}
{{- define "lastmile.podLabels" -}}
{{- $root := index . 0 -}}
{{- $labels := merge (dict "app.kubernetes.io/component" (index . 1)) (include "lastmile.selector" $root | fromYaml) -}}
{{- $labels = merge $labels (index . 2) $root.Values.podLabels -}}
{{- toYaml $labels -}}
{{- end -}}

{{- define "lastmile.serviceAccount" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "lastmile.fullname" .) .Values.serviceAccount.name }}{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{- define "lastmile.dlqTopic" -}}
{{- default (printf "%s.dlq" .Values.kafka.inputTopic) .Values.kafka.dlqTopic -}}
{{- end -}}

{{- define "lastmile.podSecurity" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "lastmile.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "lastmile.monitoringApi" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- end -}}

{{/* "<fullname>-<suffix>" (list $ "suffix"): the fullname is cut first, so the whole name stays a 63-character
DNS label (a Service's name must be one) however long the release name is. */}}
{{- define "lastmile.componentName" -}}
{{- $suffix := index . 1 -}}
{{- $full := include "lastmile.fullname" (index . 0) | trunc (int (sub 62 (len $suffix))) | trimSuffix "-" -}}
{{- printf "%s-%s" $full $suffix -}}
{{- end -}}

{{/* Triton is deployed only where the gateway uses it: runtime triton, triton.enabled. */}}
{{- define "lastmile.tritonDeployed" -}}
{{- if and (eq .Values.gateway.runtime "triton") .Values.triton.enabled -}}true{{- end -}}
{{- end -}}

{{/* The gateway's Triton: the chart's, else triton.externalUrl. */}}
{{- define "lastmile.tritonUrl" -}}
{{- if include "lastmile.tritonDeployed" . -}}
{{- printf "%s:8001" (include "lastmile.componentName" (list . "triton")) -}}
{{- else -}}
{{- .Values.triton.externalUrl -}}
{{- end -}}
{{- end -}}

{{/* Values that cannot work together fail the rendering, each with what to change. */}}
{{- define "lastmile.validate" -}}
{{- if eq .Values.gateway.runtime "triton" -}}
{{- if and (not .Values.triton.enabled) (not .Values.triton.externalUrl) -}}
{{- fail "gateway.runtime is triton, but triton.enabled is false and triton.externalUrl is empty: enable the chart's Triton (triton.enabled: true), name a Triton's gRPC address (triton.externalUrl: host:8001), or run the detectors in the gateway (gateway.runtime: embedded)" -}}
{{- end -}}
{{- if and .Values.triton.enabled .Values.triton.externalUrl -}}
{{- fail "triton.enabled and triton.externalUrl are both set: set triton.enabled: false to use the external Triton, or empty triton.externalUrl to use the chart's" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The keys of a config override (.over, under .path) that the rendered config (.base) already sets from the
chart's values, space-separated: those must be set through their values (the probes, ports, volumes, the
ScaledObject and the other pods read the same values). */}}
{{- define "lastmile.configClashes" -}}
{{- $base := .base -}}
{{- $path := .path -}}
{{- range $key, $value := .over -}}
{{- if hasKey $base $key -}}
{{- $inner := index $base $key -}}
{{- if and (kindIs "map" $inner) (kindIs "map" $value) -}}
{{- include "lastmile.configClashes" (dict "base" $inner "over" $value "path" (printf "%s.%s" $path $key)) -}}
{{- else -}}
{{- printf "%s.%s " $path $key -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A rendered config file: the chart's part (.base, YAML) with the free-form override (.over) merged in; a key of
the override that the chart's part sets fails the rendering. */}}
{{- define "lastmile.mergedConfig" -}}
{{- $base := .base | fromYaml -}}
{{- $clashes := include "lastmile.configClashes" (dict "base" $base "over" .over "path" .path) | trim -}}
{{- if $clashes -}}
{{- fail (printf "%s sets %s, which the chart renders from its own values: set those values instead (values.yaml)" .path $clashes) -}}
{{- end -}}
{{- mergeOverwrite $base (deepCopy .over) | toYaml -}}
{{- end -}}

{{/* A pod's /tmp: an emptyDir (every container runs with a read-only root filesystem). */}}
{{- define "lastmile.tmpVolume" -}}
- name: tmp
  emptyDir: {sizeLimit: 2Gi}
{{- end -}}

{{/* ipBlock peers of a list of CIDRs, each without the networks in `except` (dict "cidrs" .. "except" ..). */}}
{{- define "lastmile.ipBlocks" -}}
{{- $except := .except -}}
{{- $peers := list -}}
{{- range .cidrs -}}
{{- $block := dict "cidr" . -}}
{{- with $except -}}{{- $_ := set $block "except" . -}}{{- end -}}
{{- $peers = append $peers (dict "ipBlock" $block) -}}
{{- end -}}
{{- toJson $peers -}}
{{- end -}}

{{/* One egress rule (JSON) from an entry of networkPolicy.scorers, .stores, .hosts or .identity: its peers (an
ipBlock per CIDR of `cidrs`, less `except`, then the `to` peers) on its TCP `ports`, else the list's default
(.ports). An entry with no peer fails the rendering: an empty `to` would allow every destination.
(dict "entry" entry "ports" defaultPorts "path" "networkPolicy.stores") */}}
{{- define "lastmile.egressRule" -}}
{{- $entry := .entry -}}
{{- $peers := concat (include "lastmile.ipBlocks" (dict "cidrs" ($entry.cidrs | default list) "except" $entry.except) | fromJsonArray) ($entry.to | default list) -}}
{{- if not $peers -}}
{{- fail (printf "%s: an entry names no peer (give it cidrs or to): a rule without one would allow every destination" .path) -}}
{{- end -}}
{{- $ports := list -}}
{{- range ($entry.ports | default .ports) -}}
{{- $ports = append $ports (dict "port" (int .) "protocol" "TCP") -}}
{{- end -}}
{{- if not $ports -}}
{{- fail (printf "%s: an entry names no ports (this list has no default port)" .path) -}}
{{- end -}}
{{- toJson (dict "to" $peers "ports" $ports) -}}
{{- end -}}
