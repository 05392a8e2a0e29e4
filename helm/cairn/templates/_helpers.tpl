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
