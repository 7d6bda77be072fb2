{{/* The name of every object: the release name, or RELEASE-infscale. */}}
{{- define "infscale.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels of a component: the same as the kustomize bases', so the chart can take
over objects applied from them (a Deployment's selector cannot change). */}}
{{- define "infscale.selector" -}}
app.kubernetes.io/name: infscale
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Labels of every object: the selector's and Helm's. Call with (dict "root" $ "component" C). */}}
{{- define "infscale.labels" -}}
{{ include "infscale.selector" . }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "infscale.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The scaler's ServiceAccount. */}}
{{- define "infscale.subject" -}}
- kind: ServiceAccount
  name: {{ include "infscale.fullname" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}

{{/* The server Secret of mutual TLS. */}}
{{- define "infscale.tlsSecret" -}}
{{ .Values.tls.secretName | default (printf "%s-tls" (include "infscale.fullname" .)) }}
{{- end -}}

{{/* The activator's admin URL, which serve is allowed to read. */}}
{{- define "infscale.activatorAdmin" -}}
http://{{ include "infscale.fullname" . }}-activator-admin.{{ .Release.Namespace }}.svc:{{ .Values.activator.adminPort }}
{{- end -}}

{{/* The issuer of both certificates. */}}
{{- define "infscale.issuerRef" -}}
{{- if .Values.tls.certManager.issuerRef -}}
{{ toYaml .Values.tls.certManager.issuerRef }}
{{- else -}}
kind: Issuer
name: {{ include "infscale.fullname" . }}-ca
{{- end -}}
{{- end -}}

{{/* Scheduling and pull settings of a pod. Call with (dict "root" $ "values" V). */}}
{{- define "infscale.scheduling" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity: {{ toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
