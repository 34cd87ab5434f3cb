{{/* Names and labels shared by every manifest. */}}

{{- define "tollgate.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tollgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tollgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tollgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tollgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The image by digest when one is given, else by tag (the chart's appVersion by default). */}}
{{- define "tollgate.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if eq $tag "latest" -}}
{{- fail "image.tag: \"latest\" is not allowed, pin a version (or set image.digest)" -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The environment both the gateway and the migration Job read: secrets by reference only. */}}
{{- define "tollgate.databaseEnv" -}}
- name: TOLLGATE_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "externalDatabase.existingSecret is required: a Secret holding the PostgreSQL URL" .Values.externalDatabase.existingSecret }}
      key: {{ .Values.externalDatabase.existingSecretKey }}
{{- end -}}

{{- define "tollgate.env" -}}
- name: TOLLGATE_CONFIG
  value: /etc/tollgate/tollgate.yaml
{{ include "tollgate.databaseEnv" . }}
{{- if .Values.externalRedis.existingSecret }}
- name: TOLLGATE_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.externalRedis.existingSecret }}
      key: {{ .Values.externalRedis.existingSecretKey }}
{{- else }}
- name: TOLLGATE_REDIS_URL
  value: {{ required "externalRedis.url or externalRedis.existingSecret is required" .Values.externalRedis.url | quote }}
{{- end }}
{{- if .Values.auth.existingSecret }}
- name: TOLLGATE_ADMIN_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.auth.existingSecret }}
      key: {{ .Values.auth.existingSecretKey }}
{{- end }}
{{- if .Values.serviceMonitor.bearerTokenSecret.name }}
- name: TOLLGATE_METRICS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.serviceMonitor.bearerTokenSecret.name }}
      key: {{ .Values.serviceMonitor.bearerTokenSecret.key }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}
