#!/usr/bin/env bash
# What metrics cost: the release gateway with metrics on (the default) against metrics off
# (`metrics: {enabled: false}`), loaded side by side by bench/ab.sh. `aa` as the fourth argument
# turns metrics off on both: the same run then shows the noise floor of the figure.
#   bench/metrics-cost.sh [ROUNDS] [SECONDS] [CONNECTIONS] [aa]
set -euo pipefail
cd "$(dirname "$0")/.."
on=""
[ "${4:-}" = aa ] && on="metrics: {enabled: false}"
exec bench/ab.sh "metrics-on" "$on" "metrics-off" "metrics: {enabled: false}" "${1:-5}" "${2:-10}" "${3:-32}"
