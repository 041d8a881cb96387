# kvadmin: `make run` starts the whole stack, `make test` runs the whole suite.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-postgres setup lint bench admin-password reset-demo clean

# The Procfile's processes under kvadmin/stack.py: Redis (REDIS_URL, or an embedded one), a
# Celery worker and beat, the web server and, unless KVADMIN_DEMO is off, the simulated fleet.
run: setup
	@bin/system-deps
	@$(PY) manage.py ensure_admin
	@$(PY) -m kvadmin.stack

# The suite in TEST_WORKERS pytest-xdist processes, each with its own Redis, SQLite database,
# var/ and servers (tests/services.py): most of a test's time is spent waiting for the servers,
# workers, pods and browser it started, which the other process fills. Tests are handed out one
# at a time in the order pytest-django gives them (`loadgroup`: those of one `xdist_group`, the
# production layout sharing one deployment, go to the same process).
TEST_WORKERS ?= 2
test: setup
	@bin/system-deps --browser --monitoring
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup

# The tests that touch the database (marked `database`, see tests/conftest.py), on a private
# PostgreSQL server that the test session starts itself; `make test` runs them on SQLite.
# Browser tests check what pages show and do, and the queries behind every page run here in
# the views' own tests; `infrastructure` tests (Redis outages, groups and Sentinel, the
# gateway, the process stack) use the database only to log in or register an engine. Of both,
# only those marked `postgresql` run again: in the production layout, two operators' concurrent
# saves (PostgreSQL's row locks, not SQLite's one writer) and a save seen by the other process.
POSTGRES_TESTS := database and (postgresql or not (browser or infrastructure))
test-postgres: setup
	@bin/system-deps --browser --monitoring --postgres
	KVADMIN_TEST_DATABASE=postgresql $(VENV)/bin/pytest -m "$(POSTGRES_TESTS)"

# A new random password for the admin user, printed and kept in var/admin-password.
admin-password: setup
	@$(PY) manage.py admin_password

# Forget the demo: the simulated pods' registrations and their index entries (nothing else).
reset-demo: setup
	@$(PY) manage.py reset_demo

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

# Every benchmark script (the modules they share have no main).
bench: setup
	@for script in $$(grep -l "^if __name__ == \"__main__\":" bench/*.py); do \
		echo "== $$script"; $(PY) $$script || exit 1; done

# Everything local: the virtualenv and var/ (database, embedded Redis data, secret key).
clean:
	rm -rf $(VENV) var
