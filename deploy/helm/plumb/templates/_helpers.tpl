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

{{- define "plumb.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "plumb.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: plumb
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

{{- define "plumb.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "plumb.validationNamespace" -}}
{{- default .Release.Namespace .Values.aggregator.validationNamespace }}
{{- end }}

{{/* Container hardening both processes share: nothing beyond reading files and sockets. */}}
{{- define "plumb.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The volume name of a host path: "/var/lib/dpkg" -> "host-var-lib-dpkg". */}}
{{- define "plumb.hostVolumeName" -}}
{{- printf "host%s" (replace "/" "-" (trimSuffix "/" .)) | lower | trunc 63 | trimSuffix "-" }}
{{- end }}
