#!/usr/bin/env bash
# What cost bookkeeping costs: the release gateway keeping costs and a key's budget (every
# answer priced, its worst case set aside and charged to the budget, the cost in its log row and
# metrics) against `pricing: {costs: false}`, loaded side by side by bench/ab.sh. `aa` as the
# fourth argument turns costs off on both: the same run then shows the noise floor.
#   bench/costs-cost.sh [ROUNDS] [SECONDS] [CONNECTIONS] [aa]
set -euo pipefail
cd "$(dirname "$0")/.."
# The bench's model priced, and a budget no run reaches: both sides carry it, one keeps it.
priced="prices: [{model: bench, input: '2.50', cached_input: '1.25', output: '10'}]"
on="$priced"
[ "${4:-}" = aa ] && on="$priced
pricing: {costs: false}"
KEY_EXTRA=", budget: {usd: '1000000', period: month}" \
    exec bench/ab.sh "costs-on" "$on" "costs-off" "$priced
pricing: {costs: false}" "${1:-5}" "${2:-10}" "${3:-32}"
