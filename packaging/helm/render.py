# Renders (and lints) the Switchyard chart offline with helm-python-sdk, as `helm template` would.
# Owns the rendering step of packaging/test-kubernetes.sh: render.py CHART OUT.yaml [VALUES.json] [--lint]
import json
import sys

import helm_python as helm

chart_dir, out = sys.argv[1], sys.argv[2]
values = json.loads(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "--lint" else {}
chart = helm.Chart.load(chart_dir)
try:
    rendered = chart.render(values, name="sy", namespace="switchyard", is_install=True)
except helm.HelmError as error:
    print(f"render error: {error}")
    sys.exit(3)
docs = [text.strip() for path, text in sorted(rendered.items()) if path.endswith(".yaml") and text.strip()]
with open(out, "w") as f:
    f.write("\n---\n".join(docs) + "\n")
if "--lint" in sys.argv:
    report = helm.lint(chart_dir, values, strict=True, kube_version="v1.32.0")
    for m in report.get("messages", []):
        print(f"lint: severity {m['severity']}: {m['path']}: {m['error']}")
    if report.get("errors") or any(m["severity"] >= 2 for m in report.get("messages", [])):
        sys.exit(4)
