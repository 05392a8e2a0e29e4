{{/* Names and labels, as openstack-helm's helm-toolkit does them, kept local. */}}
{{- define "cairn.labels" -}}
app.kubernetes.io/name: cairn
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "cairn.selector" -}}
app.kubernetes.io/name: cairn
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "cairn.fullname" -}}
{{- printf "%s-cairn" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Every Cairn container: non-root, no privilege, read-only root file system. */}}
{{- define "cairn.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.pod.user.uid }}
runAsGroup: {{ .Values.pod.user.uid }}
fsGroup: {{ .Values.pod.user.uid }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "cairn.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.pod.user.uid }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The settings every component reads: the ConfigMap, and secrets by reference only. */}}
{{- define "cairn.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "cairn.fullname" . }}-etc
env:
  - name: CAIRN_DATABASE_URL
    valueFrom:
      secretKeyRef: {name: {{ .Values.secrets.database_url.name }}, key: {{ .Values.secrets.database_url.key }}}
  - name: CAIRN_REDIS_URL
    valueFrom:
      secretKeyRef: {name: {{ .Values.secrets.redis_url.name }}, key: {{ .Values.secrets.redis_url.key }}}
{{- if eq .Values.conf.cairn.auth_strategy "keystone" }}
  - name: CAIRN_KEYSTONE__PASSWORD
    valueFrom:
      secretKeyRef: {name: {{ .Values.secrets.keystone_password.name }}, key: {{ .Values.secrets.keystone_password.key }}}
{{- end }}
{{- with .Values.secrets.notification_transport_url }}
  - name: CAIRN_NOTIFICATION_TRANSPORT_URL
    valueFrom:
      secretKeyRef: {name: {{ .name }}, key: {{ .key }}}
{{- end }}
  - name: PROMETHEUS_MULTIPROC_DIR
    value: /var/run/cairn/metrics
{{- end -}}

{{- define "cairn.volumeMounts" -}}
volumeMounts:
  - {name: metrics, mountPath: /var/run/cairn/metrics}
  - {name: tmp, mountPath: /tmp}
{{- range $name, $cluster := .Values.conf.clusters }}
  - {name: ceph-{{ $name }}, mountPath: /etc/ceph/{{ $name }}, readOnly: true}
{{- end }}
{{- end -}}

{{- define "cairn.volumes" -}}
volumes:
  - {name: metrics, emptyDir: {}}
  - {name: tmp, emptyDir: {}}
{{- range $name, $cluster := .Values.conf.clusters }}
  - name: ceph-{{ $name }}
    secret:
      secretName: {{ $cluster.secret }}
      defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "cairn.scheduling" -}}
{{- with .Values.pod.node_selector }}
nodeSelector:
{{ toYaml . | indent 2 }}
{{- end }}
{{- with .Values.pod.tolerations }}
tolerations:
{{ toYaml . | indent 2 }}
{{- end }}
{{- with .Values.pod.affinity }}
affinity:
{{ toYaml . | indent 2 }}
{{- end }}
{{- end -}}

{{/* A NetworkPolicy of one component: its metrics port (if it has one) open to the
monitoring namespace only, what `ingress` adds, and egress to the destinations of
network_policy.egress and what `egress` adds. */}}
{{- define "cairn.networkPolicy" -}}
{{- $root := .root -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "cairn.fullname" $root }}-{{ .component }}
  labels:
{{ include "cairn.labels" (dict "root" $root "component" .component) | indent 4 }}
spec:
  podSelector:
    matchLabels:
{{ include "cairn.selector" (dict "root" $root "component" .component) | indent 6 }}
  policyTypes: [Ingress, Egress]
  ingress:
{{- with .ingress }}
{{ . | trim | indent 4 }}
{{- end }}
{{- if .metrics_port }}
    # Metrics: the monitoring namespace only (they name every tenant's projects and volumes).
    - from:
        - namespaceSelector:
            matchLabels:
{{ toYaml $root.Values.network_policy.monitoring_namespace_selector | indent 14 }}
      ports:
        - {port: {{ .metrics_port }}, protocol: TCP}
{{- end }}
  egress:
{{- range $name, $destination := $root.Values.network_policy.egress }}
{{- $wanted := or (ne $name "messaging") (hasPrefix "messaging" (toString $root.Values.conf.cairn.notification_driver)) }}
{{- if and $destination.to $wanted }}
    # {{ $name }}
    - to:
{{ toYaml $destination.to | indent 8 }}
{{- with $destination.ports }}
      ports:
{{- range . }}
        - port: {{ .port }}
          protocol: {{ .protocol | default "TCP" }}
{{- with .end_port }}
          endPort: {{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- with .egress }}
{{ . | trim | indent 4 }}
{{- end }}
{{- end -}}

{{/* The worker's egress to webhook receivers: "the public internet" as a NetworkPolicy
can say it, every address except the ranges that are not public (private, loopback,
link-local, CGNAT, benchmarking, multicast, reserved; in IPv6 also the forms that embed an
IPv4 address: IPv4-mapped and -compatible, NAT64, 6to4), every port; plus the networks
conf.cairn.webhook_allowed_networks lets webhooks reach. */}}
{{- define "cairn.webhookEgress" -}}
# Webhook receivers: public addresses, any port.
- to:
    - ipBlock:
        cidr: 0.0.0.0/0
        except: [0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16,
                 172.16.0.0/12, 192.0.0.0/24, 192.0.2.0/24, 192.168.0.0/16, 198.18.0.0/15,
                 198.51.100.0/24, 203.0.113.0/24, 224.0.0.0/4, 240.0.0.0/4]
    - ipBlock:
        cidr: ::/0
        except: ["::/96", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
                 "2001:db8::/32", "2002::/16", "fc00::/7", "fe80::/10", "fec0::/10",
                 "ff00::/8"]
{{- range .Values.conf.cairn.webhook_allowed_networks }}
    - ipBlock: {cidr: {{ . | quote }}}
{{- end }}
{{- end -}}

{{/* Who reaches the API's REST port (the only port the Service and the Ingress route). */}}
{{- define "cairn.restIngress" -}}
{{- if .Values.network_policy.api_from }}
# The REST API and the portal: from network_policy.api_from.
- from:
{{ toYaml .Values.network_policy.api_from | indent 4 }}
  ports:
    - {port: {{ .Values.endpoints.api.port }}, protocol: TCP}
{{- else }}
# The REST API and the portal: from anywhere (network_policy.api_from is empty); the
# API authenticates every request.
- ports:
    - {port: {{ .Values.endpoints.api.port }}, protocol: TCP}
{{- end }}
{{- end -}}

{{/* The key ring webhook signing secrets are sealed under: the API stores secrets, the
worker signs deliveries, db-sync seals or opens them when a migration changes how they
are stored; the scheduler never reads one, so it is not mounted there. */}}
{{- define "cairn.webhookKeyEnv" -}}
- name: CAIRN_WEBHOOK_SECRET_KEY_FILE
  value: /etc/cairn/webhooks/secret.key
{{- end -}}

{{- define "cairn.webhookKeyMount" -}}
- {name: webhook-secret-key, mountPath: /etc/cairn/webhooks, readOnly: true}
{{- end -}}

{{- define "cairn.webhookKeyVolume" -}}
{{- with .Values.secrets.webhook_secret_key -}}
- name: webhook-secret-key
  secret:
    secretName: {{ .name }}
    items: [{key: {{ .key }}, path: secret.key}]
    defaultMode: 0440
{{- end -}}
{{- end -}}


{{/* The file service (cairn-files): its Service's address, and the token cairn-api
presents to it, from its Secret, in both. */}}
{{- define "cairn.filesUrl" -}}
http://{{ include "cairn.fullname" . }}-files:{{ .Values.endpoints.files.port }}
{{- end -}}

{{- define "cairn.filesTokenEnv" -}}
{{- with .Values.secrets.files_token -}}
- name: CAIRN_FILES_TOKEN
  valueFrom:
    secretKeyRef: {name: {{ .name }}, key: {{ .key }}}
{{- end -}}
{{- end -}}

{{/* Who reaches cairn-files: the API's pods, on its port, and nobody else. */}}
{{- define "cairn.filesIngress" -}}
# The file service's internal routes: cairn-api's pods only.
- from:
    - podSelector:
        matchLabels:
{{ include "cairn.selector" (dict "root" . "component" "api") | indent 10 }}
  ports:
    - {port: {{ .Values.endpoints.files.port }}, protocol: TCP}
{{- end -}}

{{/* The API's way to cairn-files. */}}
{{- define "cairn.filesEgress" -}}
{{- if .Values.manifests.deployment_files -}}
# The file service (cairn-files), which the API proxies file requests to.
- to:
    - podSelector:
        matchLabels:
{{ include "cairn.selector" (dict "root" . "component" "files") | indent 10 }}
  ports:
    - {port: {{ .Values.endpoints.files.port }}, protocol: TCP}
{{- end -}}
{{- end -}}
