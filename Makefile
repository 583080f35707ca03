# kolla-salt: `make deploy` brings up the all-in-one cloud, `make test` runs every test.
VENV      ?= .venv
KOLLA     := $(VENV)/bin/kolla-salt
CONFIG    ?= /etc/kolla-salt
export KOLLA_SALT_CONFIG_DIR := $(CONFIG)

.PHONY: help setup build deploy test test-lab unit destroy lab lab-down

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup:  ## prepare this host: venv, Docker engine, debootstrap (idempotent)
	@bash scripts/setup-host.sh

build: setup  ## build the enabled services' images (unchanged ones are skipped)
	$(KOLLA) build

deploy: setup  ## prepare the host, build images, deploy the all-in-one cloud
	@bash scripts/deploy-aio.sh

test: setup  ## run the whole suite (unit, functional, integration; the lab if it starts within 45 minutes)
	@bash scripts/run-tests.sh

test-lab: setup  ## only the 3-host lab's tests (make test skips them on a machine too slow for both)
	@bash scripts/run-tests.sh -m lab tests/integration

unit: setup  ## only the unit tests (no Docker needed)
	$(VENV)/bin/pytest -q tests/unit

destroy: setup  ## remove the all-in-one containers (asks; keeps volumes)
	$(KOLLA) destroy

lab: setup  ## a lab of 3 hosts on this machine (namespaces, engines, salt-master, registry)
	$(KOLLA) lab up

lab-down: setup  ## remove the lab and everything it made
	$(KOLLA) lab down
