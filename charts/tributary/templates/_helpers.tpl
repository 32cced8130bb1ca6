{{- define "tributary.labels" -}}
app.kubernetes.io/part-of: tributary
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "tributary.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "tributary.catalogSecret" -}}
{{ .Values.catalog.existingSecret | default (printf "%s-catalog" .Release.Name) }}
{{- end -}}

{{- define "tributary.apiSecret" -}}
{{ .Values.api.existingSecret | default (printf "%s-api" .Release.Name) }}
{{- end -}}

{{- define "tributary.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 1000
# Secret volumes are group-owned by fsGroup: with mode 0440 the pod's user reads them.
fsGroup: 1000
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "tributary.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}
