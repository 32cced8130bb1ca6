{{/* The name of the chart's objects: "tributary" unless overridden (object names are <fullname>-operator, …). */}}
{{- define "tributary.fullname" -}}
{{- .Values.fullnameOverride | default .Values.nameOverride | default "tributary" | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "tributary.labels" -}}
app.kubernetes.io/part-of: tributary
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "tributary.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The chart's own pieces, by role: the Deployments' and pods' names and app.kubernetes.io/name. */}}
{{- define "tributary.operatorName" -}}{{ include "tributary.fullname" . }}-operator{{- end -}}
{{- define "tributary.apiServerName" -}}{{ include "tributary.fullname" . }}-api-server{{- end -}}
{{- define "tributary.apiServiceName" -}}{{ include "tributary.fullname" . }}-api{{- end -}}
{{- define "tributary.engineServiceAccount" -}}{{ include "tributary.fullname" . }}-engine{{- end -}}

{{- define "tributary.catalogSecret" -}}
{{ .Values.catalog.existingSecret | default (printf "%s-catalog" .Release.Name) }}
{{- end -}}

{{- define "tributary.apiSecret" -}}
{{ .Values.api.existingSecret | default (printf "%s-api" .Release.Name) }}
{{- end -}}

{{/*
The pod-level fields every chart pod takes from its values (operator.*, api.*):
scheduling, priority, security context. Called with (dict "values" $component "root" $).
*/}}
{{- define "tributary.podSpecFields" -}}
{{- with .values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.podSecurityContext }}
securityContext: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The pod template's labels (the selector's win over podLabels) and annotations. */}}
{{- define "tributary.podMetadata" -}}
{{- $labels := merge (dict "app.kubernetes.io/name" .name "app.kubernetes.io/instance" .root.Release.Name) (.values.podLabels | default dict) -}}
labels: {{- toYaml $labels | nindent 2 }}
{{- with .values.podAnnotations }}
annotations: {{- toYaml . | nindent 2 }}
{{- end }}
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
