# The two commands of the README:
#   make report   run every study notebook (local runtime by default) -> reports/*.html + reports/index.html,
#                 then the site of every kept run (benchlib publish) -> reports/site/index.html
#   make test     the static checks (make lint), then the test suite (scripts/test.sh: the pure tests
#                 in parallel, then the rest serially); a failing check fails the target before any test
#   make lint     ruff, mypy --strict (core, stats, store) and commit subjects (scripts/lint.sh)
# Both set up what they need first (scripts/setup.sh, idempotent: the project's virtual
# environment .venv with the exact versions of requirements.lock, the Jupyter kernel "benchlib").
# Pass notebook parameters to `make report` with P, e.g. make report P="-p trials 4 -p runtime docker",
# and pick notebooks with N, e.g. make report N=01_rest_mongo_go_dotnet_rust P="-p run_id <id>"
# (an existing run id resumes that run: only its missing trials are measured).
# BASE_PYTHON is the interpreter .venv is made from (default python3); PYTHON=/path/to/python
# uses an existing environment instead of .venv (see scripts/setup.sh).

BASE_PYTHON ?=
PYTHON ?= .venv/bin/python
P ?=
N ?=

.PHONY: setup report lint test test-slow lab

setup:
	BASE_PYTHON='$(BASE_PYTHON)' PYTHON='$(PYTHON)' scripts/setup.sh

report: setup
	$(PYTHON) -m benchlib.cli report --publish $(N) $(P)

lint: setup
	PYTHON=$(PYTHON) scripts/lint.sh

test: setup lint
	PYTHON=$(PYTHON) scripts/test.sh

test-slow: setup
	$(PYTHON) -m pytest -m slow

lab: setup
	$(PYTHON) -m jupyterlab notebooks/
