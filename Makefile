# Corral: `make run` (install what is missing, migrate, serve a demo) and `make test` (the suite).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
HOST ?= 127.0.0.1
PORT ?= 8000
# Web processes of `make serve` (each serves thousands of open pages; see docs/production.md).
WEB_WORKERS ?= 2
# libvirt-python compiles against libvirt-dev; libvirtd serves the simulated hosts; the QEMU
# driver, QEMU (TCG) and qemu-img run real guests (lab/qemuhosts.py, lab/tinyguest.py);
# curl and jq run the README's API walkthrough (tests/project/test_readme_walkthrough.py).
APT_PACKAGES := libvirt-dev pkg-config gcc libvirt-daemon libvirt-daemon-driver-qemu \
	qemu-system-x86 qemu-utils curl jq
# The browser the end-to-end tests drive (tests only; `make run` does not need it).
BROWSER_PACKAGES := chromium
# The soak's own PostgreSQL server and Redis (lab/soak/services.py; make soak and its short form
# in the tests).
SOAK_PACKAGES := postgresql redis-server
# What builds the Debian cloud image (lab/cloudimage.py) and logs into it (tests only).
CLOUD_IMAGE_PACKAGES := mmdebstrap e2fsprogs openssh-client
# What a fleet host runs in its own namespaces (lab/fleethosts.py): sshd, and the system libvirtd
# (libvirt-daemon-system makes the libvirt-qemu user and /etc/libvirt it needs); ip makes the
# namespaces, bridge and links; bindfs mounts their shared storage as a file system libvirt
# knows to be shared. Installed without starting them here (see fleet-host-packages).
FLEET_HOST_PACKAGES := openssh-server libvirt-daemon-system iproute2 openssh-client bindfs
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The OpenStack clients the Blazar tests drive (tests only), in a virtualenv of their own
# (OPENSTACK_VENV=var/other in the environment builds and tests another one beside it).
OPENSTACK_VENV ?= var/openstack-venv
OPENSTACK_STAMP := $(OPENSTACK_VENV)/.requirements-installed
# Ansible's openstack.cloud modules (tests only), in one more virtualenv: they need an older
# openstacksdk than the CLI (requirements-ansible.txt).
ANSIBLE_VENV ?= var/ansible-venv
ANSIBLE_STAMP := $(ANSIBLE_VENV)/.requirements-installed

.PHONY: run serve test lint format bench soak system-packages browser-packages soak-packages cloud-image-packages fleet-host-packages openstack-clients deps migrate demo clean help vendor-novnc vendor-xterm

help:
	@echo "make run    install what is missing, migrate, start 3 simulated hosts, a real QEMU host (lab), a task cluster"
	@echo "           and the web server on $(HOST):$(PORT) with a demo; Ctrl-C stops it all"
	@echo "make serve  the production web tier in the foreground: migrate, collect static files and"
	@echo "           serve project.asgi on $(HOST):$(PORT) with $(WEB_WORKERS) processes (DEBUG off unless set)"
	@echo "           (HOST, PORT and WEB_WORKERS: set them in the environment or as make serve PORT=8080)"
	@echo "make test   lint and the whole test suite (DATABASE_URL selects PostgreSQL)"
	@echo "make lint   ruff check, ruff format --check and the layers contract (lint-imports)"
	@echo "make bench  benchmarks, printed as one table"
	@echo "make soak   SOAK_MINUTES (10) of SOAK_USERS (200) API users while processes, hosts and the"
	@echo "           database fail; prints the report (JSON under var/soak/), exits 1 on a violation"

# Install those of the Debian packages named in $(1) that are missing.
define install-missing
	@missing=""; \
	for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

# Debian packages libvirt-python compiles against, and Python's venv/headers when missing.
system-packages:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || missing="$$missing python3-venv"; \
	$(PYTHON) -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
		|| missing="$$missing python3-dev"; \
	if [ -n "$$missing" ]; then \
		echo "Installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@# The tiny guest (lab/tinyguest.py) is built from packages apt must know of.
	@apt-cache show --no-all-versions linux-image-cloud-amd64 >/dev/null 2>&1 || \
		$(SUDO) apt-get update -qq
	@# QEMU lab hosts' daemons run as nobody in the group kvm (lab/simhosts.py): give that group
	@# /dev/kvm as Debian's udev rule does, where the CPU has VT-x or AMD-V; elsewhere guests use
	@# TCG (a /dev/kvm without them, a nested host's software KVM, boots no ordinary kernel).
	@if [ -c /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then \
		getent group kvm >/dev/null || $(SUDO) groupadd --system kvm || true; \
		if [ "$$(stat -c %G:%a /dev/kvm)" != kvm:660 ]; then \
			$(SUDO) chgrp kvm /dev/kvm && $(SUDO) chmod 0660 /dev/kvm || \
				echo "Cannot give /dev/kvm to the group kvm: QEMU lab guests will run under TCG."; \
		fi; \
	fi

# Debian's Chromium for the browser tests (Playwright drives it; it downloads no browser), and
# axe-core, which they inject into the portal's pages (pinned in tests/browser/package-lock.json).
browser-packages:
	$(call install-missing,$(BROWSER_PACKAGES))
	@[ tests/browser/node_modules/.package-lock.json -nt tests/browser/package-lock.json ] || \
		npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error

soak-packages:
	$(call install-missing,$(SOAK_PACKAGES))

cloud-image-packages:
	$(call install-missing,$(CLOUD_IMAGE_PACKAGES))

# Fleet hosts start their own sshd and libvirtd inside their namespaces: the packages' own services
# (an sshd on port 22 and a system libvirtd on this machine itself) are not needed, so a policy
# forbids starting them during the install (unless one is there already, as in a container).
fleet-host-packages:
	@missing=""; \
	for p in $(FLEET_HOST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing Debian packages:$$missing"; \
		policy=""; \
		if [ ! -e /usr/sbin/policy-rc.d ]; then \
			policy=/usr/sbin/policy-rc.d; \
			printf '#!/bin/sh\nexit 101\n' | $(SUDO) tee $$policy >/dev/null && $(SUDO) chmod +x $$policy; \
		fi; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
		status=$$?; [ -z "$$policy" ] || $(SUDO) rm -f $$policy; exit $$status; \
	fi

$(OPENSTACK_STAMP): requirements-openstack.txt
	$(MAKE) system-packages
	rm -rf $(OPENSTACK_VENV)
	$(PYTHON) -m venv $(OPENSTACK_VENV)
	$(OPENSTACK_VENV)/bin/pip install -q -r requirements-openstack.txt
	touch $(OPENSTACK_STAMP)

$(ANSIBLE_STAMP): requirements-ansible.txt
	$(MAKE) system-packages
	rm -rf $(ANSIBLE_VENV)
	$(PYTHON) -m venv $(ANSIBLE_VENV)
	$(ANSIBLE_VENV)/bin/pip install -q -r requirements-ansible.txt
	touch $(ANSIBLE_STAMP)

openstack-clients: $(OPENSTACK_STAMP) $(ANSIBLE_STAMP)

$(PY):
	$(MAKE) system-packages
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): requirements.txt | $(PY)
	$(MAKE) system-packages
	$(PY) -m pip install -q -r requirements.txt
	touch $(STAMP)

# system-packages each time, not only when the virtualenv is made: it is quick when all is there,
# and a machine whose virtualenv exists still gets what was added since (KVM for the lab hosts).
deps: system-packages $(STAMP)

migrate: deps
	DEBUG=$${DEBUG:-1} $(PY) manage.py migrate --noinput

demo: migrate
	DEBUG=$${DEBUG:-1} $(PY) manage.py demo_admin

run: demo
	DEBUG=$${DEBUG:-1} $(PY) manage.py devstack --addr $(HOST):$(PORT)

# gunicorn supervises WEB_WORKERS uvicorn workers (restarts a dead one, graceful reloads on HUP);
# each worker runs Django's ASGI application on an event loop. The access log is Corral's own
# (project/web/access_log.py: one line per request, secrets in query strings left out).
serve: migrate
	DEBUG=$${DEBUG:-0} $(PY) manage.py collectstatic --noinput -v 0
	DEBUG=$${DEBUG:-0} CORRAL_DB_POOL_SIZE=$${CORRAL_DB_POOL_SIZE:-20} CONN_MAX_AGE=0 \
		$(VENV)/bin/gunicorn project.asgi:application \
		--worker-class project.web.worker.UvicornWorker --workers $(WEB_WORKERS) \
		--bind $(HOST):$(PORT) --reuse-port --graceful-timeout 10

lint: deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: deps
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

test: deps browser-packages cloud-image-packages fleet-host-packages soak-packages openstack-clients lint
	$(VENV)/bin/pytest $(PYTEST_ARGS)

bench: deps
	$(PY) bench/run.py

# The soak (lab/soak/run.py): the production web tier, two task clusters, a PostgreSQL and a
# Redis of its own and simulated hosts, used by SOAK_USERS people through the API for
# SOAK_MINUTES while faults strike; exits 1 if an invariant broke (report under var/soak/).
soak: deps soak-packages
	$(PY) -m lab.soak

# noVNC, the browser's VNC client of the VM console page, is committed under
# project/static/vendor/novnc-$(NOVNC_VERSION) (its core and vendored pako, MPL-2.0 / MIT:
# LICENSE.txt there). This refreshes it from the npm release.
NOVNC_VERSION := 1.7.0
vendor-novnc:
	rm -rf var/novnc && mkdir -p var/novnc
	cd var/novnc && npm pack @novnc/novnc@$(NOVNC_VERSION) && tar xzf novnc-novnc-$(NOVNC_VERSION).tgz
	rm -rf project/static/vendor/novnc-$(NOVNC_VERSION) && mkdir -p project/static/vendor/novnc-$(NOVNC_VERSION)
	cd var/novnc/package && cp -r core vendor LICENSE.txt AUTHORS package.json \
		$(CURDIR)/project/static/vendor/novnc-$(NOVNC_VERSION)/

# xterm.js, the browser's terminal of the serial terminal page and the VM page's serial log, is
# committed under project/static/vendor/xterm-$(XTERM_VERSION) with its fit addon (the terminal
# fills its box) and its canvas renderer, loaded before the terminal opens so that xterm never
# injects <style> elements the Content-Security-Policy (style-src 'self') would block; MIT,
# each package's LICENSE there. This refreshes them from the npm releases.
XTERM_VERSION := 5.5.0
XTERM_FIT_VERSION := 0.10.0
XTERM_CANVAS_VERSION := 0.7.0
XTERM_DIR := project/static/vendor/xterm-$(XTERM_VERSION)
vendor-xterm:
	rm -rf var/xterm && mkdir -p var/xterm
	cd var/xterm && npm pack @xterm/xterm@$(XTERM_VERSION) @xterm/addon-fit@$(XTERM_FIT_VERSION) \
		@xterm/addon-canvas@$(XTERM_CANVAS_VERSION)
	cd var/xterm && for name in xterm addon-fit addon-canvas; do \
		mkdir -p $$name && tar xzf xterm-$$name-*.tgz -C $$name; done
	rm -rf $(XTERM_DIR) && mkdir -p $(XTERM_DIR)
	cp var/xterm/xterm/package/lib/xterm.js var/xterm/xterm/package/css/xterm.css \
		var/xterm/addon-fit/package/lib/addon-fit.js \
		var/xterm/addon-canvas/package/lib/addon-canvas.js $(XTERM_DIR)/
	for name in xterm addon-fit addon-canvas; do \
		cp var/xterm/$$name/package/LICENSE $(XTERM_DIR)/$$name-LICENSE; \
		cp var/xterm/$$name/package/package.json $(XTERM_DIR)/$$name-package.json; done

clean:
	rm -rf $(VENV) $(OPENSTACK_VENV) $(ANSIBLE_VENV) .pytest_cache .ruff_cache
