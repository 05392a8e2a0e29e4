# Loopback ports of the local stack (sourced). Chosen away from the services' defaults so
# the stack never collides with a system Redis, PostgreSQL or Ceph on the same machine.
REDIS_PORT=${CAIRN_REDIS_PORT:-46379}
PG_PORT=${CAIRN_PG_PORT:-45432}
CEPH_A_PORT=${CAIRN_CEPH_A_PORT:-46789}
CEPH_B_PORT=${CAIRN_CEPH_B_PORT:-46790}
API_PORT=${CAIRN_API_PORT:-8787}
# OpenStack (only with CAIRN_OPENSTACK=1, and always for `make test`).
KEYSTONE_PORT=${CAIRN_KEYSTONE_PORT:-45000}
CINDER_PORT=${CAIRN_CINDER_PORT:-48776}
RABBIT_PORT=${CAIRN_RABBIT_PORT:-45672}
RABBIT_DIST_PORT=${CAIRN_RABBIT_DIST_PORT:-45682}
EPMD_PORT=${CAIRN_EPMD_PORT:-44369}
