#!/usr/bin/env bash
# Runs a step of `make check` or `make demo` and says how long it took:
#   scripts/timed.sh NAME COMMAND...   prints "==> time: NAME N s" (also when it fails)
# scripts/check-fresh.sh collects these lines into its per-step table.
name=$1
shift
start=$SECONDS
rc=0
"$@" || rc=$?
printf '==> time: %s %d s%s\n' "$name" $((SECONDS - start)) "$([ $rc -eq 0 ] || echo " (failed, exit $rc)")"
exit $rc
