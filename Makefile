# The two commands of the README:
#   make report   run every study notebook (local runtime by default) -> reports/*.html + reports/index.html
#   make test     run the test suite
# Both set up what they need first (scripts/setup.sh, idempotent).
# Pass notebook parameters to `make report` with P, e.g. make report P="-p trials 4 -p runtime docker".

PYTHON ?= python3
P ?=

.PHONY: setup report test test-slow lab

setup:
	PYTHON=$(PYTHON) scripts/setup.sh

report: setup
	$(PYTHON) -m benchlib.cli report $(P)

test: setup
	$(PYTHON) -m pytest

test-slow: setup
	$(PYTHON) -m pytest -m slow

lab: setup
	$(PYTHON) -m jupyter lab notebooks/
