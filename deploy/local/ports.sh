# Loopback ports of the local stack (sourced). Chosen away from the services' defaults so
# the stack never collides with a system Redis, PostgreSQL or Ceph on the same machine, and
# below Linux's ephemeral range (32768-60999): a port inside it can be taken at random as
# the source port of any outgoing connection, and a server then fails to bind it (a CI
# run lost ceph-b's mon that way).
REDIS_PORT=${CAIRN_REDIS_PORT:-31379}
PG_PORT=${CAIRN_PG_PORT:-31432}
CEPH_A_PORT=${CAIRN_CEPH_A_PORT:-31789}
CEPH_B_PORT=${CAIRN_CEPH_B_PORT:-31790}
API_PORT=${CAIRN_API_PORT:-8787}
# cairn-files, the file service only cairn-api reaches (file-level restore, docs/files.md).
FILES_PORT=${CAIRN_FILES_PORT:-31880}
# OpenStack (only with CAIRN_OPENSTACK=1, and always for `make test`).
KEYSTONE_PORT=${CAIRN_KEYSTONE_PORT:-31000}
CINDER_PORT=${CAIRN_CINDER_PORT:-31776}
RABBIT_PORT=${CAIRN_RABBIT_PORT:-31672}
RABBIT_DIST_PORT=${CAIRN_RABBIT_DIST_PORT:-31682}
EPMD_PORT=${CAIRN_EPMD_PORT:-31369}
# Ceph RGW, the S3 endpoint of object-storage targets (CAIRN_RGW=1; `make test` always).
RGW_PORT=${CAIRN_RGW_PORT:-31800}
# Metrics: cairn-worker's, cairn-scheduler's and cairn-api's /metrics (each on a port of its
# own; the API's port answers 404 there), and Prometheus (PROMETHEUS=1).
WORKER_METRICS_PORT=${CAIRN_WORKER_METRICS_PORT:-31191}
SCHEDULER_METRICS_PORT=${CAIRN_SCHEDULER_METRICS_PORT:-31192}
API_METRICS_PORT=${CAIRN_API_METRICS_PORT:-31193}
PROMETHEUS_PORT=${CAIRN_PROMETHEUS_PORT:-31090}
