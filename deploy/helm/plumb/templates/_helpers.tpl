{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "plumb.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name; the release name alone when it already contains the chart name. */}}
{{- define "plumb.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "plumb.agent.fullname" -}}
{{- printf "%s-agent" (include "plumb.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "plumb.aggregator.fullname" -}}
{{- printf "%s-aggregator" (include "plumb.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Service the agents dial: the aggregator's gRPC port, its pods' addresses whether
     ready or not (aggregator-agents-service.yaml). */}}
{{- define "plumb.aggregator.agentsService" -}}
{{- printf "%s-agents" (include "plumb.aggregator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object: commonLabels, then the chart's own (which win on a clash). */}}
{{- define "plumb.labels" -}}
{{- $own := dict
      "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-")
      "app.kubernetes.io/name" (include "plumb.name" .)
      "app.kubernetes.io/instance" .Release.Name
      "app.kubernetes.io/version" .Chart.AppVersion
      "app.kubernetes.io/managed-by" .Release.Service
      "app.kubernetes.io/part-of" "plumb" }}
{{- toYaml (merge $own (omit .Values.commonLabels "app.kubernetes.io/component")) }}
{{- end }}

{{/* A pod template's labels, each key once: commonLabels, the component's podLabels, then
     the selector labels and version, which always win so the selector keeps matching.
     Called with (list $ "agent" .Values.agent.podLabels). */}}
{{- define "plumb.podLabels" -}}
{{- $ctx := index . 0 }}
{{- $own := dict
      "app.kubernetes.io/name" (include "plumb.name" $ctx)
      "app.kubernetes.io/instance" $ctx.Release.Name
      "app.kubernetes.io/component" (index . 1)
      "app.kubernetes.io/version" $ctx.Chart.AppVersion
      "app.kubernetes.io/part-of" "plumb" }}
{{- toYaml (merge $own (deepCopy (index . 2)) (deepCopy $ctx.Values.commonLabels)) }}
{{- end }}

{{- define "plumb.agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "plumb.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end }}

{{- define "plumb.aggregator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "plumb.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: aggregator
{{- end }}

{{/* A component's image, called with (list $ .Values.agent.image): repository@digest when a
     digest is set, else repository:tag (its tag, else image.tag, else the appVersion). A set
     image.repository is the one image of both components, with image.digest. */}}
{{- define "plumb.image" -}}
{{- $ctx := index . 0 }}
{{- $own := index . 1 }}
{{- $shared := $ctx.Values.image | default dict }}
{{- $repository := $own.repository }}
{{- $digest := $own.digest }}
{{- if $shared.repository }}
{{- $repository = $shared.repository }}
{{- $digest = $shared.digest }}
{{- end }}
{{- if $digest }}
{{- printf "%s@%s" $repository $digest }}
{{- else }}
{{- printf "%s:%s" $repository ($own.tag | default $shared.tag | default $ctx.Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* A component's pull policy, called with (list $ .Values.agent.image). */}}
{{- define "plumb.imagePullPolicy" -}}
{{- (index . 1).pullPolicy | default ((index . 0).Values.image).pullPolicy | default "IfNotPresent" }}
{{- end }}

{{/* imagePullSecrets and an umbrella chart's global.imagePullSecrets (names or {name: }). */}}
{{- define "plumb.imagePullSecrets" -}}
{{- $names := list }}
{{- range concat ((.Values.global).imagePullSecrets | default list) .Values.imagePullSecrets }}
{{- if kindIs "string" . }}
{{- $names = append $names . }}
{{- else }}
{{- $names = append $names .name }}
{{- end }}
{{- end }}
{{- with uniq $names }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end }}

{{- define "plumb.validationNamespace" -}}
{{- default .Release.Namespace .Values.aggregator.validationNamespace }}
{{- end }}

{{/* The agent's node affinity: the terms are ORed, so a node with any one of
     agent.gpuNodeLabels or agent.optInLabel runs the agent. */}}
{{- define "plumb.agent.nodeAffinity" -}}
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
      {{- range .Values.agent.gpuNodeLabels }}
      - matchExpressions:
          - key: {{ .key }}
            operator: In
            values: [{{ .value | quote }}]
      {{- end }}
      {{- with .Values.agent.optInLabel }}
      - matchExpressions:
          - key: {{ .key }}
            operator: In
            values: [{{ .value | quote }}]
      {{- end }}
{{- end }}

{{/* The volume name of a host path: "/var/lib/dpkg" -> "host-var-lib-dpkg". */}}
{{- define "plumb.hostVolumeName" -}}
{{- printf "host%s" (replace "/" "-" (trimSuffix "/" .)) | lower | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt) both listeners use: aggregator.tls.secret
when given, else the one the chart generates (aggregator.tls.generate), else none (plaintext).
*/}}
{{- define "plumb.aggregator.tlsSecret" -}}
{{- if .Values.aggregator.tls.secret -}}
{{- .Values.aggregator.tls.secret -}}
{{- else if .Values.aggregator.tls.generate -}}
{{- printf "%s-tls" (include "plumb.aggregator.fullname" .) -}}
{{- end -}}
{{- end }}
