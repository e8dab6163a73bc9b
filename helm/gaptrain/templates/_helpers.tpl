{{/*
Names. With release "gaptrain" and the default values every object is
named as deploy/ names it: the operator's objects gaptrain-operator, the
others gaptrain-<what> (gaptrain-edit, gaptrain-jobs, ...).
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "gaptrain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: fullnameOverride; else the release's
name when it contains the chart's name (release "gaptrain", "gaptrain-prod"),
else "<release>-<name>". Cut to 52 characters so that the longest suffix
("-dashboards") keeps names within 63.
*/}}
{{- define "gaptrain.prefix" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := include "gaptrain.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The operator's objects (Deployment, ServiceAccount, ClusterRole and its
binding, PodDisruptionBudget, its PodMonitor) and its leader election
Lease: fullnameOverride as given, else "<prefix>-operator".
*/}}
{{- define "gaptrain.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-operator" (include "gaptrain.prefix" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* "gaptrain-0.1.0", for the helm.sh/chart label. */}}
{{- define "gaptrain.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object. app.kubernetes.io/name is only on the operator's
Deployment, pods, ServiceAccount, RBAC and budget (gaptrain.operatorLabels),
as in deploy/.
*/}}
{{- define "gaptrain.labels" -}}
helm.sh/chart: {{ include "gaptrain.chart" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gaptrain
{{- end }}

{{/*
What the operator's pods are selected by (the Deployment, the
PodDisruptionBudget, the anti-affinity, the operator's PodMonitor).
app.kubernetes.io/name stays gaptrain-operator by default: deploy/monitoring's
PodMonitor and prometheus-scrape.yml select the operator's pods by it.
*/}}
{{- define "gaptrain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gaptrain.name" . }}-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gaptrain.operatorLabels" -}}
{{ include "gaptrain.labels" . }}
app.kubernetes.io/name: {{ include "gaptrain.name" . }}-operator
app.kubernetes.io/component: operator
{{- end }}

{{/*
The ServiceAccount the operator's pods run as and the ClusterRole is bound
to: serviceAccount.name, else the operator's name (the schema requires a
name when serviceAccount.create is false: never the namespace's "default").
*/}}
{{- define "gaptrain.serviceAccountName" -}}
{{- default (include "gaptrain.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/* The operator's image: repository@digest when a digest is given, else repository:tag. */}}
{{- define "gaptrain.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
A PodMonitor's endpoint (both PodMonitors'): the pods' port named metrics,
with monitoring.podMonitor's interval, timeout and relabelings. Called
with monitoring.podMonitor.
*/}}
{{- define "gaptrain.podMetricsEndpoint" -}}
- port: metrics
  path: /metrics
  {{- with .interval }}
  interval: {{ . }}
  {{- end }}
  {{- with .scrapeTimeout }}
  scrapeTimeout: {{ . }}
  {{- end }}
  {{- with .relabelings }}
  relabelings:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .metricRelabelings }}
  metricRelabelings:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
