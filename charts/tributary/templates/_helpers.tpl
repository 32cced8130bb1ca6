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


{{- define "tributary.imagePullSecrets" -}}
{{- with .Values.image.pullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The engine pod defaults, as JSON for the operator (TRIBUTARY_ENGINE_POD); empty values left out. */}}
{{- define "tributary.enginePod" -}}
{{- $engine := .Values.engine -}}
{{- $pod := dict -}}
{{- with $engine.resources }}{{ $_ := set $pod "resources" . }}{{ end -}}
{{- with $engine.nodeSelector }}{{ $_ := set $pod "nodeSelector" . }}{{ end -}}
{{- with $engine.tolerations }}{{ $_ := set $pod "tolerations" . }}{{ end -}}
{{- with $engine.affinity }}{{ $_ := set $pod "affinity" . }}{{ end -}}
{{- with $engine.priorityClassName }}{{ $_ := set $pod "priorityClassName" . }}{{ end -}}
{{- with ($engine.imagePullSecrets | default .Values.image.pullSecrets) }}{{ $_ := set $pod "imagePullSecrets" . }}{{ end -}}
{{- with $engine.podLabels }}{{ $_ := set $pod "labels" . }}{{ end -}}
{{- with $engine.podAnnotations }}{{ $_ := set $pod "annotations" . }}{{ end -}}
{{- with $engine.temporaryStorage }}{{ $_ := set $pod "temporaryStorage" . }}{{ end -}}
{{- toJson $pod -}}
{{- end -}}

{{/* The api-server probes' scheme: HTTPS when it has a TLS Secret. */}}
{{- define "tributary.apiScheme" -}}
{{ if .Values.api.tls.existingSecret }}HTTPS{{ else }}HTTP{{ end }}
{{- end }}
