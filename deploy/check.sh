#!/usr/bin/env bash
# Static checks of deploy/ (no Docker engine runs on the CI machines):
# promtool (Debian's prometheus package) on the scrape configs and alert
# rules; kubernetes-validate (PyPI, schemas bundled) on the manifests; the
# compose file, the Grafana dashboard and provisioning parsed, and every
# metric they query checked against the documented list in src/metrics/catalog.rs;
# the Dockerfile's COPY sources and the systemd unit checked.
set -euo pipefail
cd "$(dirname "$0")"
venv=${CLASSIFYD_CHECK_VENV:-../.venv-check}
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q -r requirements-check.txt
promtool check config prometheus/prometheus.yml
promtool check config prometheus/compose.yml
promtool check rules prometheus/alerts.yml
"$venv/bin/kubernetes-validate" --strict kubernetes/*.yaml
if command -v systemd-analyze >/dev/null 2>&1 && systemd-analyze --version >/dev/null 2>&1; then
  # The unit names /usr/local/bin/classifyd, which a CI machine lacks.
  systemd-analyze verify --man=no systemd/classifyd.service 2>&1 | grep -v "not found\|Failed to prepare filename\|is not executable" || true
fi
"$venv/bin/python" - <<'PY'
import json, re, sys, yaml, pathlib
root = pathlib.Path("..")
documented = set(re.findall(r'"(classifyd_[a-z0-9_]+)",\s*"(?:counter|gauge|histogram)"', (root / "src/metrics/catalog.rs").read_text()))
assert documented, "no documented metrics found in src/metrics/catalog.rs"
errors = []

def used(expr):
    names = set(re.findall(r"\b(classifyd_[a-z0-9_]+?)(?:_bucket|_sum|_count)?\b", expr))
    return {n for n in names}

# Grafana dashboard: valid JSON, unique panel ids or titles, known metrics only.
dash = json.loads((pathlib.Path("grafana/dashboards/classifyd.json")).read_text())
for p in dash["panels"]:
    for t in p.get("targets", []):
        for n in used(t["expr"]):
            if n not in documented:
                errors.append(f"dashboard panel {p['title']!r} queries undocumented {n}")
titles = [p["title"] for p in dash["panels"]]
if len(titles) != len(set(titles)):
    errors.append("dashboard has duplicate panel titles")
for f in pathlib.Path("grafana/provisioning").rglob("*.yml"):
    yaml.safe_load(f.read_text())

# Alert rules: known metrics only.
for g in yaml.safe_load(pathlib.Path("prometheus/alerts.yml").read_text())["groups"]:
    for r in g["rules"]:
        for n in used(r["expr"]):
            if n not in documented:
                errors.append(f"alert {r['alert']} uses undocumented {n}")

# Compose: services, images or builds, mounted files that exist.
compose = yaml.safe_load(pathlib.Path("compose.yaml").read_text())
for name, svc in compose["services"].items():
    if "image" not in svc and "build" not in svc:
        errors.append(f"compose service {name} has neither image nor build")
    for v in svc.get("volumes", []):
        src = v.split(":")[0]
        if src.startswith(".") and not pathlib.Path(src).exists():
            errors.append(f"compose service {name} mounts missing {src}")
    for dep in svc.get("depends_on", {}):
        if dep not in compose["services"]:
            errors.append(f"compose service {name} depends on unknown {dep}")
builds = [svc["build"] for svc in compose["services"].values() if "build" in svc]
if not builds:
    errors.append("compose builds no classifyd image")
for b in builds:
    if not (pathlib.Path(b["context"]) / b["dockerfile"]).exists():
        errors.append("compose build points at a missing Dockerfile")
roles = [" ".join(svc.get("command", [])) for svc in compose["services"].values()]
for role in ("--role learner", "--role predictor"):
    if not any(role in r for r in roles):
        errors.append(f"compose runs no {role}")

# Dockerfile: multi-stage, non-root, COPY sources exist (relative to the repo root).
docker = pathlib.Path("Dockerfile").read_text()
if docker.count("FROM ") < 2:
    errors.append("Dockerfile is not multi-stage")
if not re.search(r"^USER \d+", docker, re.M):
    errors.append("Dockerfile runtime does not drop root")
for line in docker.splitlines():
    if line.startswith("COPY ") and "--from" not in line:
        for src in line.split()[1:-1]:
            if not (root / src).exists():
                errors.append(f"Dockerfile copies missing {src}")

for e in errors:
    print("error:", e, file=sys.stderr)
if errors:
    sys.exit(1)
print(f"deploy: {len(dash['panels'])} dashboard panels, compose with {len(compose['services'])} services, {len(documented)} documented metrics: ok")
PY
