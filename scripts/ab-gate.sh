#!/bin/sh
# A pull request's build (B) against main's (A), both images in the local Docker engine, one
# benchlib run: exit status 1 when B regressed beyond the margin, 2 for bad input, else 0
# (docs/ab.md). Run it from the benchlib checkout, or anywhere with `benchlib` on PATH.
#
# usage: scripts/ab-gate.sh IMAGE [benchlib run options...]
#   IMAGE        the image's name, tagged :main (A) and :pr (B)
#   MARGIN       the gate's margin (default 5%)
#   BENCHLIB     the benchlib command (default: benchlib)
set -eu
image=${1:?usage: scripts/ab-gate.sh IMAGE [benchlib run options...]}
shift
exec "${BENCHLIB:-benchlib}" run 10_ab -p a_image "$image:main" -p b_image "$image:pr" \
    -p a_label main -p b_label pr --fail-on-regression "${MARGIN:-5%}" "$@"
