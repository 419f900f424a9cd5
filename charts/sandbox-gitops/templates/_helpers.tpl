{{/*
The labels config/ gives every object it writes by hand, and the Deployment's selector: the
chart must not change them, or an install from config/default could not be upgraded with it.
*/}}
{{- define "sandbox-gitops.selectorLabels" -}}
app.kubernetes.io/name: sandbox-gitops
app.kubernetes.io/component: controller
{{- end }}

{{/*
Helm's standard labels, on every object the chart renders and on nothing config/ renders, so the
parity test (charts/chart_test.go) drops exactly these.
*/}}
{{- define "sandbox-gitops.chartLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{- define "sandbox-gitops.labels" -}}
{{ include "sandbox-gitops.selectorLabels" . }}
{{ include "sandbox-gitops.chartLabels" . }}
{{- end }}

{{/*
The controller image. With a digest it is pulled by digest, as kustomize's images override
writes it: repository:tag@digest when a tag is given too (what install.yaml pins, and what the
chart `make release` packages sets), else repository@digest. Without one, repository:tag with
the chart's appVersion as the default tag.
*/}}
{{- define "sandbox-gitops.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}{{ with .Values.image.tag }}:{{ . }}{{ end }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
The controller flags the values set, one YAML list item a line; a flag whose value is empty is
left out, so the controller's own default applies.
*/}}
{{- define "sandbox-gitops.flags" -}}
{{- $c := .Values.controller -}}
{{- $flags := list -}}
{{- with $c.clusterDomain }}{{ $flags = append $flags (printf "--cluster-domain=%s" .) }}{{ end -}}
{{- with $c.policyPacks }}{{ $flags = append $flags (printf "--policy-packs=%s" (join "," .)) }}{{ end -}}
{{- with $c.allowedLabelDomains }}{{ $flags = append $flags (printf "--allowed-label-domains=%s" (join "," .)) }}{{ end -}}
{{- with $c.namespaces }}{{ $flags = append $flags (printf "--namespaces=%s" (join "," .)) }}{{ end -}}
{{- with $c.controllers }}{{ $flags = append $flags (printf "--controllers=%s" (join "," .)) }}{{ end -}}
{{- with $c.kubeAPIQPS }}{{ $flags = append $flags (printf "--kube-api-qps=%v" .) }}{{ end -}}
{{- with $c.kubeAPIBurst }}{{ $flags = append $flags (printf "--kube-api-burst=%v" (int64 .)) }}{{ end -}}
{{- with $c.workers.sandbox }}{{ $flags = append $flags (printf "--sandbox-workers=%v" (int64 .)) }}{{ end -}}
{{- with $c.workers.template }}{{ $flags = append $flags (printf "--template-workers=%v" (int64 .)) }}{{ end -}}
{{- with $c.workers.claim }}{{ $flags = append $flags (printf "--claim-workers=%v" (int64 .)) }}{{ end -}}
{{- with $c.workers.warmPool }}{{ $flags = append $flags (printf "--warm-pool-workers=%v" (int64 .)) }}{{ end -}}
{{- with $c.logLevel }}{{ $flags = append $flags (printf "--zap-log-level=%v" .) }}{{ end -}}
{{- $fixed := list "leader-elect" "leader-election-namespace" "metrics-bind-address" "health-probe-bind-address" "webhook-port" "webhook-namespace" -}}
{{- $named := dict "cluster-domain" "clusterDomain" "policy-packs" "policyPacks" "allowed-label-domains" "allowedLabelDomains" "namespaces" "namespaces" "controllers" "controllers" "kube-api-qps" "kubeAPIQPS" "kube-api-burst" "kubeAPIBurst" "sandbox-workers" "workers.sandbox" "template-workers" "workers.template" "claim-workers" "workers.claim" "warm-pool-workers" "workers.warmPool" "zap-log-level" "logLevel" -}}
{{- range $name, $value := $c.extraArgs }}
{{- if has $name $fixed }}{{ fail (printf "controller.extraArgs.%s: the chart sets --%s itself (leader election stays on; the ports are the Services')" $name $name) }}{{ end }}
{{- with get $named $name }}{{ fail (printf "controller.extraArgs.%s: set controller.%s instead" $name .) }}{{ end }}
{{- $flags = append $flags (printf "--%s=%v" $name $value) }}
{{- end -}}
{{- range $i, $f := $flags }}{{ if $i }}{{ "\n" }}{{ end }}- {{ quote $f }}{{ end }}
{{- end }}

{{/*
The job label Prometheus gives the metrics Service's targets (the Service's name, the Prometheus
Operator's default), for the alert rules.
*/}}
{{- define "sandbox-gitops.metricsSelector" -}}
job="sandbox-gitops-controller-metrics",namespace="{{ .Release.Namespace }}"
{{- end }}
