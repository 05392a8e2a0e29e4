{{/*
Values the schema cannot refuse alone (they depend on each other). Each failure says what
to set; templates/checks.yaml runs them on every render, whatever `manifests` switches.
*/}}
{{- define "cairn.checks" -}}
{{- $conf := .Values.conf.cairn -}}
{{- if and (eq $conf.auth_strategy "noauth") (ne $conf.environment "development") -}}
{{- fail "conf.cairn.auth_strategy noauth trusts whatever project and roles a request's headers claim: it renders only with conf.cairn.environment set to development. Use auth_strategy keystone" -}}
{{- end -}}
{{- if and (eq $conf.auth_strategy "keystone") (empty $conf.admin_projects) -}}
{{- fail "conf.cairn.admin_projects is empty: list the Keystone project ID (not its name: names are unique only within a domain) of the cloud's admin project, e.g. from `openstack project show admin -f value -c id`" -}}
{{- end -}}
{{- $perTarget := int (default 4 $conf.max_jobs_per_target) -}}
{{- $perProject := int (default 2 $conf.max_jobs_per_project) -}}
{{- if and (gt $perTarget 1) (ge $perProject $perTarget) -}}
{{- fail (printf "conf.cairn.max_jobs_per_project (%d) must be below conf.cairn.max_jobs_per_target (%d): one project's queue would otherwise hold every slot of a target its tenants share (a target with one slot takes a project limit of 1)" $perProject $perTarget) -}}
{{- end -}}
{{- if and (gt (int .Values.pod.replicas.api) 1) (not .Values.secrets.portal_session_key) -}}
{{- fail (printf "pod.replicas.api is %d: set secrets.portal_session_key ({name, key} of a Secret holding `openssl rand -hex 32`), or each API replica seals portal sessions with a key of its own and a session works only on the replica that signed it in" (int .Values.pod.replicas.api)) -}}
{{- end -}}
{{- if not .Values.secrets.webhook_secret_key -}}
{{- fail "set secrets.webhook_secret_key ({name, key} of a Secret holding `openssl rand -hex 32`): the API seals webhook signing secrets under it, the workers open them to sign deliveries, and the db-sync job needs it for migrations that seal them" -}}
{{- end -}}
{{- if and .Values.manifests.deployment_files (not .Values.secrets.files_token) -}}
{{- fail "set secrets.files_token ({name, key} of a Secret holding `openssl rand -hex 32`): cairn-api presents it to the file service (cairn-files), which answers nobody without it. manifests.deployment_files: false runs no file service" -}}
{{- end -}}
{{- if .Values.manifests.deployment_files -}}
{{- /* cairn-files' memory at its fullest: each open restore point's parser (RLIMIT_AS) and
reader cache, a download's blocks in flight and ahead (96 MiB) for each, and the service
itself (256 MiB), under the pod's memory limit, or the kernel kills the file service. */ -}}
{{- $mib := 1048576 -}}
{{- $sessions := int64 (default 16 $conf.files_sessions) -}}
{{- $parser := int64 (default 536870912 $conf.files_parser_memory_bytes) -}}
{{- $cache := int64 (default 67108864 $conf.files_cache_bytes) -}}
{{- $need := add (mul $sessions (add $parser $cache (mul 96 $mib))) (mul 256 $mib) -}}
{{- $limit := toString .Values.pod.resources.files.limits.memory -}}
{{- $bytes := 0 -}}
{{- if hasSuffix "Gi" $limit -}}{{- $bytes = mul (int64 (trimSuffix "Gi" $limit)) 1073741824 -}}
{{- else if hasSuffix "Mi" $limit -}}{{- $bytes = mul (int64 (trimSuffix "Mi" $limit)) $mib -}}
{{- else if hasSuffix "G" $limit -}}{{- $bytes = mul (int64 (trimSuffix "G" $limit)) 1000000000 -}}
{{- else if hasSuffix "M" $limit -}}{{- $bytes = mul (int64 (trimSuffix "M" $limit)) 1000000 -}}
{{- else -}}{{- $bytes = int64 $limit -}}
{{- end -}}
{{- if gt $need $bytes -}}
{{- fail (printf "cairn-files may need %d MiB: conf.cairn.files_sessions (%d) x (files_parser_memory_bytes %d MiB + files_cache_bytes %d MiB + a download's 96 MiB) + 256 MiB, above pod.resources.files.limits.memory (%s). Lower files_sessions or files_parser_memory_bytes, or raise the limit" (div $need $mib) $sessions (div $parser $mib) (div $cache $mib) $limit) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.manifests.ingress_api (empty $conf.api_trusted_proxies) -}}
{{- fail "manifests.ingress_api is on but conf.cairn.api_trusted_proxies is empty: every tenant would reach the API as the Ingress controller's address, sharing one client's limits (one client's garbage tokens or failed sign-ins would refuse everyone's). Set it to the controller pods' CIDR, e.g. [\"10.244.0.0/16\"] (`kubectl get pods -n ingress-nginx -o wide` shows their addresses)" -}}
{{- end -}}
{{- if and .Values.manifests.network_policy (empty .Values.network_policy.egress.ceph.to) -}}
{{- fail "network_policy.egress.ceph.to is empty: name the Ceph clusters' public networks (e.g. [{ipBlock: {cidr: 10.20.0.0/24}}]; `ceph mon dump` lists the monitors), or Cairn's pods cannot reach Ceph. manifests.network_policy: false renders no NetworkPolicy at all" -}}
{{- end -}}
{{- end -}}
