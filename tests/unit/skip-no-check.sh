#!/bin/sh
# skip-no-check.sh -- stands in for the unit tests when configure did not
# find the Check framework, so `make check` says so instead of silently
# running fewer tests.
echo "SKIP: unit tests (tests/unit/test_*) need the Check framework:"
echo "      install the Debian package 'check' (tools/install-deps.sh does)"
echo "      and re-run ./configure"
exit 77
