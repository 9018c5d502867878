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
{{- $names = concat $names (list $v.dcuResourceName $v.dcuResourceMem $v.dcuResourceCores $v.hcuResourceName $v.hcuResourceMem $v.hcuResourceCores) -}}
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
{{- /* HAMi's devices.<vendor>.customresources lists, appended while the vendor is enabled, as HAMi's chart does. */ -}}
{{- range $vendor := list "ascend" "mthreads" "enflame" "kunlun" "awsneuron" "iluvatar" "vastai" "biren" "amd" -}}
{{- $dev := index $d $vendor -}}
{{- if $dev.enabled -}}
{{- range ($dev.customresources | default list) -}}
{{- $names = append $names (toString .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range ($names | compact | uniq) }}
{{ . }}
{{- end -}}
{{- end -}}

{{/* The ConfigMap hami-rs reads its device config from: deviceConfig.configMapName, else this chart's own. */}}
{{- define "hami-rs.deviceConfigMap" -}}
{{- .Values.deviceConfig.configMapName | default (printf "%s-device" (include "hami-rs.fullname" .) | trunc 63 | trimSuffix "-") -}}
{{- end -}}

{{/* HAMi's values --------------------------------------------------------------------------------- */}}

{{/* "true" when the dotted path (dict "root" $ "path" "a.b.c") is present in the values, else "". */}}
{{- define "hami-rs.hasPath" -}}
{{- $cur := .root.Values -}}
{{- $ok := true -}}
{{- range (splitList "." .path) -}}
{{- if and $ok (kindIs "map" $cur) (hasKey $cur .) -}}
{{- $cur = index $cur . -}}
{{- else -}}
{{- $ok = false -}}
{{- end -}}
{{- end -}}
{{- if $ok }}true{{ end -}}
{{- end -}}

{{/* HAMi's node-side values (and the two HAMi's own templates never read) this chart accepts and
ignores: the given ones, comma-separated. tests/values_schema.py checks this list against its own. */}}
{{- define "hami-rs.hamiIgnored" -}}
{{- $paths := list "global.gpuHookPath" "global.managedNodeSelectorEnable" "global.managedNodeSelector" "podSecurityPolicy" "scheduler.serviceAccountName" "devicePlugin.enabled" "devicePlugin.gpuOperatorToolkitReady" "devicePlugin.image" "devicePlugin.monitor" "devicePlugin.nodeConfiguration" "devicePlugin.createRuntimeClass" "devicePlugin.migStrategy" "devicePlugin.passDeviceSpecsEnabled" "devicePlugin.deviceListStrategy" "devicePlugin.nvidiaHookPath" "devicePlugin.nvidiaDriverRoot" "devicePlugin.gdrcopyEnabled" "devicePlugin.gdsEnabled" "devicePlugin.mofedEnabled" "devicePlugin.extraArgs" "devicePlugin.extraEnvs" "devicePlugin.service" "devicePlugin.pluginPath" "devicePlugin.libPath" "devicePlugin.podAnnotations" "devicePlugin.hostPID" "devicePlugin.hostNetwork" "devicePlugin.securityContext" "devicePlugin.nvidiaNodeSelector" "devicePlugin.tolerations" "devicePlugin.updateStrategy" "devicePlugin.resources" "mockDevicePlugin" "devices.ascend.image" "devices.ascend.imagePullPolicy" "devices.ascend.extraArgs" "devices.ascend.nodeSelector" "devices.ascend.tolerations" -}}
{{- $given := list -}}
{{- range $paths -}}
{{- if include "hami-rs.hasPath" (dict "root" $ "path" .) -}}
{{- $given = append $given . -}}
{{- end -}}
{{- end -}}
{{- join ", " $given -}}
{{- end -}}

{{/* True when scheduler.extender.image names HAMi's own image (HAMi's values file). */}}
{{- define "hami-rs.extenderImageIsHamis" -}}
{{- if regexMatch "(^|/)projecthami/hami$" (toString .Values.scheduler.extender.image.repository) }}true{{ end -}}
{{- end -}}

{{/* The hami-rs image: scheduler.extender.image, or hami-rs's own default when that names HAMi's
image (its registry and tag are HAMi's too; keep in step with values.yaml). global.imageTag, HAMi's
tag for HAMi's images, never applies. */}}
{{- define "hami-rs.extenderImage" -}}
{{- $img := .Values.scheduler.extender.image -}}
{{- if include "hami-rs.extenderImageIsHamis" . -}}
{{- $img = dict "registry" "ghcr.io" "repository" "hami-rs/hami-rs" "tag" "" -}}
{{- end -}}
{{- include "hami-rs.image" (dict "image" $img "root" . "defaultTag" .Chart.AppVersion) -}}
{{- end -}}

{{/* The sidecar's extra args, one YAML list: scheduler.kubeScheduler.extraArgs, then HAMi's
extraNewArgs, less --config and --policy-config-file (with the value after a bare one): this chart
sets its own --config. Repeats are dropped. */}}
{{- define "hami-rs.kubeSchedulerExtraArgs" -}}
{{- $ks := .Values.scheduler.kubeScheduler -}}
{{- $out := list -}}
{{- $skip := false -}}
{{- range (concat ($ks.extraArgs | default list) ((index $ks "extraNewArgs") | default list)) -}}
{{- $a := toString . -}}
{{- if $skip -}}
{{- $skip = false -}}
{{- else if regexMatch "^--?(config|policy-config-file)$" $a -}}
{{- $skip = true -}}
{{- else if not (regexMatch "^--?(config|policy-config-file)=" $a) -}}
{{- $out = append $out $a -}}
{{- end -}}
{{- end -}}
{{- $out | uniq | toYaml -}}
{{- end -}}

{{/* hami-rs's own arguments (serve and its flags), one YAML list; deployment.yaml appends extraArgs. */}}
{{- define "hami-rs.serveArgs" -}}
{{- $s := .Values.scheduler -}}
{{- $ex := .Values.scheduler.extender -}}
{{- $ns := include "hami-rs.namespace" . -}}
{{- $a := list "serve" (printf "--http_bind=0.0.0.0:%s" (include "hami-rs.httpsPort" .)) "--cert_file=/tls/tls.crt" "--key_file=/tls/tls.key" -}}
{{- $a = append $a (printf "--scheduler-name=%s" .Values.schedulerName) -}}
{{- $a = append $a (printf "--metrics-bind-address=%s" $s.metricsBindAddress) -}}
{{- $a = append $a (printf "--node-scheduler-policy=%s" $s.defaultSchedulerPolicy.nodeSchedulerPolicy) -}}
{{- $a = append $a (printf "--gpu-scheduler-policy=%s" $s.defaultSchedulerPolicy.gpuSchedulerPolicy) -}}
{{- $a = append $a (printf "--force-overwrite-default-scheduler=%v" $s.forceOverwriteDefaultScheduler) -}}
{{- $a = append $a "--device-config-file=/device-config.yaml" -}}
{{- $a = append $a (printf "--leader-elect=%v" $s.leaderElect) -}}
{{- if $s.leaderElect -}}
{{- $a = append $a (printf "--leader-elect-resource-name=%s" .Values.schedulerName) -}}
{{- $a = append $a (printf "--leader-elect-resource-namespace=%s" $ns) -}}
{{- end -}}
{{- if .Values.devices.ascend.enabled }}{{ $a = append $a "--enable-ascend=true" }}{{ end -}}
{{- if .Values.devices.iluvatar.enabled }}{{ $a = append $a "--enable-iluvatar=true" }}{{ end -}}
{{- with $s.nodeLabelSelector -}}
{{- $pairs := list -}}
{{- range $k, $val := . }}{{ $pairs = append $pairs (printf "%s=%v" $k $val) }}{{ end -}}
{{- $a = append $a (printf "--node-label-selector=%s" (join "," $pairs)) -}}
{{- end -}}
{{- if .Values.legacyMetrics }}{{ $a = append $a "--legacy-metrics=true" }}{{ end -}}
{{- if eq (toString .Values.podDeviceMetrics) "false" }}{{ $a = append $a "--pod-device-metrics=false" }}{{ end -}}
{{- $a = append $a (printf "--node-lock-timeout=%v" $s.nodeLockExpire) -}}
{{- $a = append $a (printf "--node-lock-retry-timeout=%v" $ex.nodeLockRetryTimeout) -}}
{{- $a = append $a (printf "--bind-lock-wait=%v" $ex.bindLockWait) -}}
{{- $a = append $a (printf "--reservation-ttl=%v" $ex.reservationTTL) -}}
{{- $a = append $a (printf "--gang-claim-ttl=%v" $ex.gangClaimTTL) -}}
{{- $a = append $a (printf "--defragment=%v" $ex.defragment) -}}
{{- $a = append $a (printf "--preemption=%s" (ternary "on" "off" $ex.preemption.enabled)) -}}
{{- $a = append $a (printf "--preemption-hold=%v" $ex.preemption.hold) -}}
{{- $a = append $a (printf "--console-access=%s" $ex.consoleAccess) -}}
{{- if $ex.clientCASecret }}{{ $a = append $a "--client-ca-file=/client-ca/ca.crt" }}{{ end -}}
{{- $a = append $a (printf "--device-plugin-namespace=%s" (.Values.devicePlugin.serviceAccount.namespace | default $ns)) -}}
{{- $a = append $a (printf "--device-plugin-service-account=%s" .Values.devicePlugin.serviceAccount.name) -}}
{{- $a = append $a (printf "--filter-mode=%s" $ex.filterMode) -}}
{{- $a = append $a (printf "--decision-write=%s" $ex.decisionWrite) -}}
{{- $a = append $a (printf "--filter-result=%s" $ex.filterResult) -}}
{{- $a = append $a (printf "--arbiters=%d" (int $ex.arbiters)) -}}
{{- $a = append $a (printf "--kube-qps=%v" $ex.kubeQPS) -}}
{{- $a = append $a (printf "--kube-burst=%d" (int $ex.kubeBurst)) -}}
{{- $a = append $a (printf "--kube-timeout=%d" (int $ex.kubeTimeout)) -}}
{{- $a = append $a (printf "--shutdown-grace=%v" $ex.shutdownGrace) -}}
{{- $a = append $a (printf "--log-format=%s" $ex.logFormat) -}}
{{- $a = append $a (printf "--v=%d" (int $ex.verbosity)) -}}
{{- toYaml $a -}}
{{- end -}}

{{/* The flag name of an argument ("--v=4", "-v" -> "v"), or "" for a value. */}}
{{- define "hami-rs.flagName" -}}
{{- if hasPrefix "-" . -}}
{{- regexReplaceAll "^--?([^=]*)(=.*)?$" . "${1}" -}}
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
