{{/* Chart name, overridable. */}}
{{- define "wdp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, plus the chart name unless it already contains it. */}}
{{- define "wdp.fullname" -}}
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

{{- define "wdp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wdp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "wdp.labels" -}}
{{ include "wdp.selectorLabels" . }}
app.kubernetes.io/part-of: wasm-device-plugin
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "wdp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "wdp.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "wdp.configMapName" -}}
{{- default (printf "%s-config" (include "wdp.fullname" .)) .Values.config.existingConfigMap }}
{{- end }}

{{- define "wdp.guestsConfigMapName" -}}
{{- default (printf "%s-guests" (include "wdp.fullname" .)) .Values.config.existingGuestsConfigMap }}
{{- end }}

{{/* Keys of the guests ConfigMap, sorted: from `guests`, or `existingGuestKeys` for a ConfigMap you manage. */}}
{{- define "wdp.guestKeys" -}}
{{- if .Values.config.existingGuestsConfigMap }}
{{- .Values.config.existingGuestKeys | sortAlpha | toJson }}
{{- else }}
{{- keys .Values.config.guests | sortAlpha | toJson }}
{{- end }}
{{- end }}
