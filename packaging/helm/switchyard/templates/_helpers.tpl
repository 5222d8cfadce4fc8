{{/* Names and labels of the Switchyard chart.
     Owns how every object is named and selected. */}}
{{- define "switchyard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "switchyard.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "switchyard.labels" -}}
{{ include "switchyard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "switchyard.secretName" -}}
{{- default (printf "%s-secrets" (include "switchyard.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "switchyard.sharedState" -}}
{{- if .Values.redis.enabled -}}
{{- printf "redis://:${REDIS_PASSWORD}@%s-redis:6379/0" (include "switchyard.fullname" .) -}}
{{- else -}}
{{- .Values.sharedState.url -}}
{{- end -}}
{{- end -}}
