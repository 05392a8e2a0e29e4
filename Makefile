# Cairn — make help lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
STATE := $(CURDIR)/.state
API_PORT ?= 8787
OPENSTACK ?= 0
PROMETHEUS ?= 0
RGW ?= 0
CINDER_BACKUP ?= 0

.PHONY: help bootstrap portal test-portal up down status image test test-unit test-tools test-only soak fuzz fuzz-files lint typecheck check bench bench-instant bench-fleet bench-object bench-portal bench-scheduler bench-hostile bench-object-key-race bench-rbd-path bench-files clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

bootstrap: ## install what is missing: Debian packages, the venv, locked Python packages
	@CAIRN_OPENSTACK=$(OPENSTACK) CAIRN_PROMETHEUS=$(PROMETHEUS) CAIRN_RGW=$(RGW) bash deploy/local/bootstrap.sh

portal: bootstrap ## build the web portal into portal/dist (cairn-api serves it at /)
	@bash deploy/local/portal.sh

test-portal: portal ## the portal's unit tests (Vitest, seconds; its browser tests run in `make test`)
	@cd portal && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npm test --silent

up: bootstrap portal ## start the whole local stack with a demo volume and print where the API and portal are (OPENSTACK=1: with Keystone and Cinder; OPENSTACK=1 CINDER_BACKUP=cairn: and cinder-backup with Cairn's driver; PROMETHEUS=1: with Prometheus; RGW=1: with Ceph RGW, an S3 endpoint)
	@CAIRN_OPENSTACK=$(OPENSTACK) CAIRN_CINDER_BACKUP=$(CINDER_BACKUP) CAIRN_PROMETHEUS=$(PROMETHEUS) CAIRN_RGW=$(RGW) CAIRN_API_PORT=$(API_PORT) bash deploy/local/stack.sh up all
	@echo
	@echo "Cairn is up."
	@echo "  portal:   http://127.0.0.1:$(API_PORT)/"
	@echo "  API:      http://127.0.0.1:$(API_PORT)  (docs: http://127.0.0.1:$(API_PORT)/docs)"
ifeq ($(OPENSTACK),1)
	@CAIRN_OPENSTACK=1 $(PY) deploy/local/demo_volume.py --cinder $(STATE)/clouds.yaml $(STATE)/ceph-a/ceph.conf
	@echo "  Keystone: http://127.0.0.1:31000/v3, Cinder: http://127.0.0.1:31776"
	@echo "  CLI:      export OS_CLIENT_CONFIG_FILE=$(STATE)/clouds.yaml OS_CLOUD=cairn-demo; $(VENV)/bin/cairn volume list"
	@echo "  openstack: .venv-osc/bin/openstack protection volume list  (the same variables)"
else
	@$(PY) deploy/local/demo_volume.py $(STATE)/ceph-a/ceph.conf
	@echo "  volume:   ceph-a/volumes/demo  (try the curl session in README.md)"
endif
ifeq ($(PROMETHEUS),1)
	@echo "  Prometheus: http://127.0.0.1:31090  (alerts: http://127.0.0.1:31090/alerts; Cairn's metrics: docs/operations.md)"
endif
ifeq ($(RGW),1)
	@echo "  S3 (RGW): $$(jq -r '.endpoint + ", bucket " + .bucket' $(STATE)/rgw-ceph-a/s3.json)  (credentials: $(STATE)/rgw-ceph-a/s3.json)"
endif
	@echo "  logs:     $(STATE)/log/"
	@echo "  stop:     make down"

down: ## stop the local stack
	@bash deploy/local/stack.sh down

status: ## show what of the local stack is running
	@bash deploy/local/stack.sh status

image: portal ## build the one Cairn image (Containerfile) with buildah, no registry needed: make image TAG=...
	@CAIRN_IMAGE=1 bash deploy/local/bootstrap.sh
	@bash deploy/image/build.sh $(or $(TAG),localhost/cairn:dev)

lint: bootstrap ## ruff, and the import contracts between layers (pyproject.toml, import-linter)
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/lint-imports --no-cache

typecheck: bootstrap ## mypy --strict on services/, api/, worker/, cli/, cairnclient/, manage/
	@$(VENV)/bin/mypy

check: lint typecheck ## lint and type check

WORKERS ?= 3
UNIT_WORKERS ?= $(shell nproc)
COVERAGE ?= 0
test: ## everything from a clean clone: installs, the stack's servers, lint, types, every tier (COVERAGE=1: and line coverage of api/ services/ worker/; WORKERS=n pytest-xdist workers, default 3); prints each step's time and the ten slowest tests
	@WORKERS=$(WORKERS) COVERAGE=$(COVERAGE) bash deploy/local/test.sh all

test-unit: bootstrap ## the unit tier: every test that needs no server (seconds; nothing has to run), on every core
	@# One process per core: 1096 tests took 32 s in one on two cores, 21 s in two.
	@$(PY) -m pytest -p no:cacheprovider -q -n $(UNIT_WORKERS) --dist load tests/unit

test-tools: ## the tools tier: helm on the chart, promtool on the alert rules, buildah on the image (no server)
	@CAIRN_PROMETHEUS=1 CAIRN_HELM=1 CAIRN_IMAGE=1 bash deploy/local/bootstrap.sh
	@$(PY) -m pytest -p no:cacheprovider -q tests/tools

test-only: ## against a running stack: ARGS="tests/integration/api/test_plans.py" runs one file in seconds (any pytest arguments); without ARGS every tier as `make test` runs them (COVERAGE=1, WORKERS=n as for test)
	@WORKERS=$(WORKERS) COVERAGE=$(COVERAGE) bash deploy/local/test.sh only $(ARGS)

SEED ?= $(shell date +%s)
CASES ?= 300
MAX_MIB ?= 64
soak: bootstrap ## the long tests at full size: the randomized data-path test over every kind of target, a seed's kind in turn (make soak SEED=... CASES=... MAX_MIB=... MODEL_TARGETS=local,offsite,s3,dir; a failing case prints its replay) and the limits test on 20 volumes
	@CAIRN_SECOND_CLUSTER=1 CAIRN_RGW=1 bash deploy/local/stack.sh up infra
	@echo "soak: seeds $(SEED)..$$(( $(SEED) + $(CASES) - 1 )), volumes up to $(MAX_MIB) MiB, targets $(if $(MODEL_TARGETS),$(MODEL_TARGETS),of every kind (tests/support/model_targets.py))"
	@CAIRN_MODEL_SEED=$(SEED) CAIRN_MODEL_CASES=$(CASES) CAIRN_MODEL_MAX_MIB=$(MAX_MIB) \
	    $(if $(MODEL_TARGETS),CAIRN_MODEL_TARGETS=$(MODEL_TARGETS)) \
	    CAIRN_MODEL_KILL_CHANCE=0.1 CAIRN_MODEL_SQLITE_CASES=0 CAIRN_LIMITS_VOLUMES=20 \
	    CAIRN_TEST_REDIS_DB_OFFSET=52 $(PY) -m pytest -p no:cacheprovider -q \
	    tests/integration/worker/test_data_path_model.py tests/integration/api/test_limits.py

fuzz: bootstrap ## the schema fuzz at full size (Schemathesis: many more requests per operation and longer stateful walks than `make test`'s)
	@CAIRN_SECOND_CLUSTER=1 CAIRN_RGW=1 bash deploy/local/stack.sh up infra
	@CAIRN_FUZZ_FULL=1 CAIRN_TEST_REDIS_DB_OFFSET=58 $(PY) -m pytest -p no:cacheprovider -q \
	    tests/integration/api/test_schema_fuzz.py

fuzz-files: ## issue 34's fuzz at full size, no server: CASES mutated images (default 1000) per kind (ext4, XFS, NTFS, FAT32, Btrfs, GPT and MBR disks) through sealed parser children with the production limits, seeds SEED..; prints per kind the outcomes, the slowest call against its deadline, the child's peak memory against its limit; fails on a hang, a 5xx or memory over the limit (KINDS=ext4,xfs for some; a failing case prints its replay)
	@$(PY) -m tests.support.fs_fuzz --cases $(if $(filter command line,$(origin CASES)),$(CASES),1000) --seed $(SEED) $(if $(KINDS),--kinds $(KINDS))

bench: ## copy-engine benchmark on its own BlueStore clusters (~25 min); prints figures
	@CAIRN_BENCH=1 CAIRN_OPENSTACK=$(OPENSTACK) bash deploy/local/bootstrap.sh
	@$(PY) bench/copy_engine.py

bench-instant: ## instant vs copy restore of 1/10/100 GiB Cinder volumes; restarts the stack with ceph-a on BlueStore (~10 min); prints figures
	@CAIRN_OPENSTACK=1 bash deploy/local/bootstrap.sh
	@bash deploy/local/stack.sh down
	@CEPH_OBJECTSTORE=bluestore CEPH_STORE_BYTES=34359738368 CAIRN_OPENSTACK=1 bash deploy/local/stack.sh up infra
	@$(PY) bench/instant_restore.py $(ARGS)

bench-fleet: ## nightly fleet: Cairn vs cinder-backup (Ceph driver, and Cairn's driver) vs the rbd shell sequence over 3 nights, each side's concurrency printed; restarts the stack with ceph-a made anew on BlueStore (~20 min at the default 20 volumes, Cairn 2 x 10 jobs; ARGS="--volumes 200 --size-gib 1", "--latency-ms 5" for a delay line to the OSD); prints figures
	@CAIRN_OPENSTACK=1 bash deploy/local/bootstrap.sh
	@bash deploy/local/stack.sh down
	@# A store filled by an earlier run stalls the one OSD (bench/README.md): start empty.
	@rm -rf $(STATE)/ceph-a
	@CEPH_OBJECTSTORE=bluestore CEPH_STORE_BYTES=68719476736 CAIRN_OPENSTACK=1 bash deploy/local/stack.sh up infra
	@$(PY) bench/fleet.py $(ARGS)

bench-object: ## object-storage target: chunk engine to Ceph RGW at 1-20 uploads in flight, dedup, 1 vs 4 MiB chunks, against rbd export | S3 and the RBD target; restores against S3 download | rbd import and 10 vs 1 in flight on loopback and through an S3 delay line; client CPU against the commit before issue 35; repeated full after 1 % changed through the API; restarts ceph-a anew on BlueStore with RGW (~18 min; ARGS="--delay 0.025 --size-gib 1 --synthetic-gib 4 --runs 3 --delay-runs 1 --before 86babd0 --only cpu,restore,engine,synthetic"; the delay line holds this machine's TCP window, --window); prints figures
	@CAIRN_RGW=1 bash deploy/local/bootstrap.sh
	@bash deploy/local/stack.sh down
	@rm -rf $(STATE)/ceph-a
	@CEPH_OBJECTSTORE=bluestore CEPH_STORE_BYTES=68719476736 CAIRN_RGW=1 bash deploy/local/stack.sh up infra
	@$(PY) bench/object_target.py $(ARGS)

bench-object-key-race: ## issue 31's acceptance: 16 first backups to a fresh object target at once, two workers restarted, every restore point restored and compared, ARGS="--rounds 20" (default; "--forced" makes the key race happen every round); on the running stack's servers (~10-15 min); prints figures
	@CAIRN_RGW=1 bash deploy/local/bootstrap.sh
	@CAIRN_RGW=1 CAIRN_SECOND_CLUSTER=1 bash deploy/local/stack.sh up infra
	@$(PY) bench/object_key_race.py $(ARGS)

bench-rbd-path: ## issue 33's acceptance: the RBD path before the target seam (a7576ab) and after it, interleaved in one run: full backup, incremental, restore, verify, delete of 3 x 1 GiB volumes, 5 repetitions (ARGS="--reps 5 --volumes 3 --size-mib 1024 --before REF"); on the running stack's servers (~15 min); prints figures
	@bash deploy/local/bootstrap.sh
	@bash deploy/local/stack.sh up infra
	@$(PY) bench/rbd_path.py $(ARGS)

bench-files: ## issue 34: file-level restore through the API, ext4 and XFS volumes of 100 GiB with 50 000 files on the RBD and object targets: first listing, 1 GiB download against rbd export and a restore, time to first file against a whole restore, versions across 30 restore points; restarts ceph-a anew on BlueStore with RGW (~20 min; ARGS="--size-gib 1 --files 200" for a small run); prints figures
	@CAIRN_RGW=1 bash deploy/local/bootstrap.sh
	@bash deploy/local/stack.sh down
	@rm -rf $(STATE)/ceph-a
	@# 32 GiB: each volume (~1.3 GiB written), its two backups and one restore at a time.
	@# ceph-b too (the stack's `offsite` target, which the bench does not use), as for
	@# bench-object-key-race: its Cairn's settings name it.
	@CEPH_OBJECTSTORE=bluestore CEPH_STORE_BYTES=34359738368 CAIRN_RGW=1 CAIRN_SECOND_CLUSTER=1 bash deploy/local/stack.sh up infra
	@$(PY) bench/files.py $(ARGS)

bench-portal: ## the portal at cloud scale in Chromium: 1000 Cinder volumes, 100 000 restore points; first paint, page render times, script size (~10 min the first time, Cinder makes the volumes); prints figures
	@CAIRN_OPENSTACK=1 CAIRN_PORTAL_TESTS=1 bash deploy/local/bootstrap.sh
	@bash deploy/local/portal.sh
	@CAIRN_OPENSTACK=1 bash deploy/local/stack.sh up infra
	@$(PY) bench/portal.py $(ARGS)

bench-scheduler: bootstrap ## scheduler and list-endpoint benchmark on PostgreSQL (~3 min); prints figures
	@bash deploy/local/stack.sh up infra
	@$(PY) bench/scheduler.py

bench-hostile: bootstrap ## hostile-load and scheduler-worst-case benchmark (~2 min); prints figures
	@bash deploy/local/stack.sh up infra
	@$(PY) bench/hostile_load.py

clean: down ## stop the stack and remove its data, the venv and caches
	rm -rf $(STATE) $(VENV) .venv-osc .mypy_cache .ruff_cache
