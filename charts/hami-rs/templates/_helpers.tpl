{{/* Names ------------------------------------------------------------------------------------ */}}

{{- define "hami-rs.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object name prefix: fullnameOverride, else the release name when it already contains the chart name, else both. */}}
{{- define "hami-rs.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hami-rs.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "hami-rs.tlsSecret" -}}
{{- printf "%s-tls" (include "hami-rs.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The MutatingWebhookConfiguration (cluster-scoped, so the namespace is part of the name). */}}
{{- define "hami-rs.webhookName" -}}
{{- printf "%s-%s-webhook" (include "hami-rs.fullname" .) (include "hami-rs.namespace" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami-rs.certgenName" -}}
{{- printf "%s-certgen" (include "hami-rs.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami-rs.metricsServiceName" -}}
{{- printf "%s-metrics" (include "hami-rs.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels ----------------------------------------------------------------------------------- */}}

{{- define "hami-rs.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hami-rs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: hami-scheduler
{{- end -}}

{{/* Common labels without the component (objects that are not the scheduler set their own). */}}
{{- define "hami-rs.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "hami-rs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hami
{{- with .Values.global.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "hami-rs.labels" -}}
{{ include "hami-rs.commonLabels" . }}
app.kubernetes.io/component: hami-scheduler
{{- end -}}

{{/* metadata.annotations block from global.annotations, or nothing. */}}
{{- define "hami-rs.annotations" -}}
{{- with .Values.global.annotations -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* Images ----------------------------------------------------------------------------------- */}}

{{/* (dict "image" <image values> "root" $ "defaultTag" <tag>) -> registry/repository:tag */}}
{{- define "hami-rs.image" -}}
{{- $img := .image -}}
{{- $registry := default $img.registry .root.Values.global.imageRegistry -}}
{{- $tag := default .defaultTag $img.tag -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" $registry $img.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" $img.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* imagePullSecrets for a pod from global.imagePullSecrets and the given lists of names. */}}
{{- define "hami-rs.pullSecrets" -}}
{{- $names := list -}}
{{- range .root.Values.global.imagePullSecrets }}{{ $names = append $names . }}{{ end -}}
{{- range .lists }}{{ range . }}{{ $names = append $names . }}{{ end }}{{ end -}}
{{- with ($names | uniq) -}}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* kube-scheduler follows the API server's version unless a tag is given. */}}
{{- define "hami-rs.kubeSchedulerTag" -}}
{{- $v := regexFind "^v?[0-9]+\\.[0-9]+\\.[0-9]+" .Capabilities.KubeVersion.Version -}}
{{- if not (hasPrefix "v" $v) }}{{ $v = printf "v%s" $v }}{{ end -}}
{{- $v -}}
{{- end -}}

{{/* Ports ------------------------------------------------------------------------------------ */}}

{{- define "hami-rs.metricsPort" -}}
{{- $port := last (splitList ":" (toString .Values.scheduler.metricsBindAddress)) -}}
{{- if not (regexMatch "^[0-9]+$" $port) -}}
{{- fail (printf "scheduler.metricsBindAddress %q must end in :<port>" .Values.scheduler.metricsBindAddress) -}}
{{- end -}}
{{- $port -}}
{{- end -}}

{{/* hami-rs's main listener: webhook, extender and probes, always TLS. */}}
{{- define "hami-rs.httpsPort" -}}443{{- end -}}

{{/* Resource names ---------------------------------------------------------------------------- */}}

{{/* Every resource name of every enabled vendor, one per line, in HAMi's vendor order. */}}
{{- define "hami-rs.resourceNames" -}}
{{- $v := .Values -}}
{{- $d := .Values.devices -}}
{{- $names := list -}}
{{- if $d.nvidia.enabled -}}
{{- $names = concat $names (list $v.resourceName $v.resourceMem $v.resourceCores $v.resourceMemPercentage $v.resourcePriority) -}}
{{- end -}}
{{- if $d.cambricon.enabled -}}
{{- $names = concat $names (list $v.mluResourceName $v.mluResourceMem $v.mluResourceCores) -}}
{{- end -}}
{{- if $d.hygon.enabled -}}
{{- $names = concat $names (list $v.dcuResourceName $v.dcuResourceMem $v.dcuResourceCores) -}}
{{- end -}}
{{- if $d.metax.enabled -}}
{{- $names = concat $names (list $d.metax.resourceCountName $v.metaxResourceName $v.metaxResourceCore $v.metaxResourceMem) -}}
{{- end -}}
{{- if $d.ascend.enabled -}}
{{- range $d.ascend.chips -}}
{{- $names = concat $names (list .resourceName .resourceMemoryName .resourceCoreName) -}}
{{- end -}}
{{- end -}}
{{- if $d.mthreads.enabled -}}
{{- $names = concat $names (list $d.mthreads.resourceCountName $d.mthreads.resourceMemoryName $d.mthreads.resourceCoreName) -}}
{{- end -}}
{{- if $d.enflame.enabled -}}
{{- $names = concat $names (list $d.enflame.resourceNameGCU $v.enflameResourceNameDRSGCU $v.enflameResourceNameGCUMemory $v.enflameResourceNameGCUCore) -}}
{{- end -}}
{{- if $d.kunlun.enabled -}}
{{- $names = concat $names (list $v.kunlunResourceName $v.kunlunResourceVCountName $v.kunlunResourceVMemoryName) -}}
{{- end -}}
{{- if $d.awsneuron.enabled -}}
{{- $names = concat $names (list $d.awsneuron.resourceCountName $d.awsneuron.resourceCoreName) -}}
{{- end -}}
{{- if $d.amd.enabled -}}
{{- $names = concat $names (list $d.amd.resourceCountName $d.amd.resourceMemoryName $d.amd.resourceCoreName) -}}
{{- end -}}
{{- if $d.iluvatar.enabled -}}
{{- range $d.iluvatar.chips -}}
{{- $names = concat $names (list .resourceCountName .resourceMemoryName .resourceCoreName) -}}
{{- end -}}
{{- end -}}
{{- if $d.vastai.enabled -}}
{{- $names = append $names $v.vastaiResourceName -}}
{{- end -}}
{{- if $d.biren.enabled -}}
{{- $names = append $names $v.birenResourceName -}}
{{- end -}}
{{- range ($names | compact | uniq) }}
{{ . }}
{{- end -}}
{{- end -}}

{{/* Checks ----------------------------------------------------------------------------------- */}}

{{- define "hami-rs.validate" -}}
{{- /* HAMi's value names, which this chart spells differently (tests/values_schema.py lists them too). */ -}}
{{- $hami := dict "kubeQPS" "scheduler.extender.kubeQPS" "nodeLockRetryTimeout" "scheduler.extender.nodeLockRetryTimeout" "extenderHTTPTimeout" "scheduler.kubeScheduler.extender.httpTimeout" -}}
{{- range $name, $ours := $hami -}}
{{- if hasKey $.Values.scheduler $name -}}
{{- fail (printf "scheduler.%s is HAMi's name for this value: hami-rs reads %s" $name $ours) -}}
{{- end -}}
{{- end -}}
{{- if hasKey .Values "podDisruptionBudget" -}}
{{- fail "podDisruptionBudget is HAMi's place for this value: hami-rs reads scheduler.podDisruptionBudget (minAvailable or maxUnavailable, enabled)" -}}
{{- end -}}
{{- if not .Values.schedulerName -}}
{{- fail "schedulerName must not be empty" -}}
{{- end -}}
{{- if and .Values.scheduler.leaderElect (not .Values.scheduler.kubeScheduler.enabled) -}}
{{- fail "scheduler.leaderElect follows the sidecar kube-scheduler's Lease: it needs scheduler.kubeScheduler.enabled" -}}
{{- end -}}
{{- if and (gt (int .Values.scheduler.replicas) 1) (not .Values.scheduler.leaderElect) -}}
{{- fail "scheduler.replicas > 1 needs scheduler.leaderElect" -}}
{{- end -}}
{{- if lt (int .Values.scheduler.replicas) 1 -}}
{{- fail "scheduler.replicas must be at least 1" -}}
{{- end -}}
{{- if eq (int .Values.scheduler.runAsUser) 0 -}}
{{- fail "scheduler.runAsUser must not be 0: both containers run as non-root" -}}
{{- end -}}
{{- if not (has .Values.scheduler.admissionWebhook.failurePolicy (list "Ignore" "Fail")) -}}
{{- fail "scheduler.admissionWebhook.failurePolicy must be Ignore or Fail" -}}
{{- end -}}
{{- if not (has .Values.scheduler.admissionWebhook.updateGuard.failurePolicy (list "Ignore" "Fail")) -}}
{{- fail "scheduler.admissionWebhook.updateGuard.failurePolicy must be Ignore or Fail" -}}
{{- end -}}
{{- if not (has .Values.scheduler.extender.consoleAccess (list "trusted" "any")) -}}
{{- fail "scheduler.extender.consoleAccess must be trusted or any" -}}
{{- end -}}
{{- if not .Values.devicePlugin.serviceAccount.name -}}
{{- fail "devicePlugin.serviceAccount.name must name the device plugin's ServiceAccount: /refit answers no one else" -}}
{{- end -}}
{{- if not (has .Values.scheduler.extender.logFormat (list "human" "json")) -}}
{{- fail "scheduler.extender.logFormat must be human or json" -}}
{{- end -}}
{{- if not (has .Values.scheduler.extender.filterMode (list "snapshot" "messages")) -}}
{{- fail "scheduler.extender.filterMode must be snapshot or messages" -}}
{{- end -}}
{{- if not (has .Values.scheduler.extender.decisionWrite (list "bind" "filter")) -}}
{{- fail "scheduler.extender.decisionWrite must be bind or filter" -}}
{{- end -}}
{{- end -}}

{{/* The webhook's custom host when customURL is enabled, else nothing (certificate SANs). */}}
{{- define "hami-rs.customHost" -}}
{{- if .Values.scheduler.admissionWebhook.customURL.enabled -}}
{{- .Values.scheduler.admissionWebhook.customURL.host -}}
{{- end -}}
{{- end -}}

{{/* Names the serving certificate is valid for, comma-separated (kube-webhook-certgen --host). */}}
{{- define "hami-rs.certHosts" -}}
{{- $fullname := include "hami-rs.fullname" . -}}
{{- $ns := include "hami-rs.namespace" . -}}
{{- $hosts := list (printf "%s.%s.svc" $fullname $ns) (printf "%s.%s.svc.cluster.local" $fullname $ns) "127.0.0.1" -}}
{{- with (include "hami-rs.customHost" .) }}{{ $hosts = append $hosts . }}{{ end -}}
{{- $hosts | uniq | join "," -}}
{{- end -}}
