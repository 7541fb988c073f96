# The two commands of the README:
#   make report   run every study notebook (local runtime by default) -> reports/*.html + reports/index.html
#   make test     run the test suite (scripts/test.sh: the pure tests in parallel, then the rest serially)
# Both set up what they need first (scripts/setup.sh, idempotent).
# Pass notebook parameters to `make report` with P, e.g. make report P="-p trials 4 -p runtime docker",
# and pick notebooks with N, e.g. make report N=01_rest_mongo_go_dotnet_rust P="-p run_id <id>"
# (an existing run id resumes that run: only its missing trials are measured).

PYTHON ?= python3
P ?=
N ?=

.PHONY: setup report test test-slow lab

setup:
	PYTHON=$(PYTHON) scripts/setup.sh

report: setup
	$(PYTHON) -m benchlib.cli report $(N) $(P)

test: setup
	PYTHON=$(PYTHON) scripts/test.sh

test-slow: setup
	$(PYTHON) -m pytest -m slow

lab: setup
	$(PYTHON) -m jupyter lab notebooks/
