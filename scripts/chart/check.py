"""The Helm chart (charts/infscale) against the kustomize bases (manifests/), object by object.

Run by scripts/chart/check.sh, which installs the renderers. For each value set the chart is
rendered by Helm's own engine (helm_python) with release name and namespace `infscale`, and the
bases by kubectl's kustomize; both sides are parsed and compared field by field after dropping
the labels only Helm sets. A difference names the value set, the object and the field.
It also lints the chart, checks that values.schema.json refuses misspelt values, packages the
chart into target/chart/ (whose shared files must be the bases' bytes, and which must render as
the directory does), and renders it in another namespace to find any namespace written in.
"""

import copy
import os
import subprocess
import sys
import tarfile

import helm_python as helm
import yaml

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
CHART = os.path.join(ROOT, "charts", "infscale")
RELEASE = NAMESPACE = "infscale"

# Labels Helm's charts carry and the bases do not (the selectors are the bases', unchanged).
HELM_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
}

# Objects of the bases the chart does not make, each with the reason.
BASE_ONLY = {
    ("Namespace", None, "infscale"): "Helm installs into a namespace it is given "
    "(`-n infscale --create-namespace`); a chart that owned it would delete it on uninstall, "
    "with whatever else runs there",
}

# The files the chart reads with .Files.Get: links to the bases' own files, so one copy exists.
SHARED_FILES = {
    "files/dashboard.json": "manifests/observability/dashboard.json",
    "files/alerts.yaml": "manifests/observability/alerts.yaml",
    "files/routes.yaml": "manifests/activator/routes.yaml",
}


def fail(msg):
    print(f"chart: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def docs(text):
    return [d for d in yaml.safe_load_all(text) if d]


def key(obj):
    m = obj.get("metadata", {})
    return (obj.get("kind"), m.get("namespace"), m.get("name"))


def show(k):
    kind, ns, name = k
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


# The chart labels every object it makes with name and component, so that one selector finds
# all of a release (`kubectl get -l app.kubernetes.io/name=infscale`); the bases label only
# workloads, Services, the PDB and the NetworkPolicy. Those two labels where the bases' object
# has none are the one intended difference inside an object.
OWN_LABELS = {"app.kubernetes.io/name", "app.kubernetes.io/component"}


def strip_helm_labels(obj, base):
    obj = copy.deepcopy(obj)
    for meta in (obj.get("metadata"), obj.get("spec", {}).get("template", {}).get("metadata")):
        if meta and "labels" in meta:
            for label in HELM_LABELS:
                meta["labels"].pop(label, None)
            if not meta["labels"]:
                del meta["labels"]
    meta = obj.get("metadata", {})
    if base is not None and "labels" in meta:
        theirs = base.get("metadata", {}).get("labels", {})
        for label in OWN_LABELS - set(theirs):
            meta["labels"].pop(label, None)
        if not meta["labels"]:
            del meta["labels"]
    return obj


def kustomize(*dirs):
    out = []
    for d in dirs:
        text = subprocess.run(
            ["kubectl", "kustomize", os.path.join(ROOT, d)],
            check=True, capture_output=True, text=True,
        ).stdout
        out += docs(text)
    return out


def render(chart, values):
    rendered = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    out = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        out += docs(text)
    return out


def diff(a, b, path=""):
    """Paths where the chart's `a` and the base's `b` differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            p = f"{path}.{k}"
            if k not in a:
                out.append(f"{p}: missing in the chart (base: {b[k]!r})")
            elif k not in b:
                out.append(f"{p}: only in the chart ({a[k]!r})")
            else:
                out += diff(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items in the chart, {len(b)} in the base: {a!r} != {b!r}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: chart {a!r} != base {b!r}"]


def compare(name, chart_objs, base_objs, chart_only=()):
    """Object by object; `chart_only` are (kind, namespace, name) the chart adds on purpose."""
    base = {key(o): o for o in base_objs}
    mine = {key(o): strip_helm_labels(o, base.get(key(o))) for o in chart_objs}
    if len(mine) != len(chart_objs):
        fail(f"{name}: the chart renders an object twice")
    problems = []
    for k in sorted(set(base) - set(mine), key=str):
        if k not in BASE_ONLY:
            problems.append(f"{show(k)}: in the bases, not rendered by the chart")
    for k in sorted(set(mine) - set(base), key=str):
        if k not in chart_only:
            problems.append(f"{show(k)}: rendered by the chart, not in the bases")
    for k in chart_only:
        if k not in mine:
            problems.append(f"{show(k)}: expected from the chart, not rendered")
    matched = 0
    for k in sorted(set(mine) & set(base), key=str):
        d = diff(mine[k], base[k])
        problems += [f"{show(k)} {line}" for line in d]
        matched += not d
    if problems:
        fail(f"value set {name!r}:\n  " + "\n  ".join(problems))
    return matched


def find(objs, kind, name):
    for o in objs:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    fail(f"no {kind} {name} in the bases")


def per_namespace(base, namespaces):
    """The bases as their activator/rbac.yaml says to confine the activator: started with
    `--namespaces a,b`, its ClusterRole's rules in a Role, bound in each namespace instead."""
    role = find(base, "ClusterRole", "infscale-activator")
    binding = find(base, "ClusterRoleBinding", "infscale-activator")
    out = [o for o in base if o not in (role, binding)]
    deploy = find(out, "Deployment", "infscale-activator")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    args[args.index("--namespaces") + 1] = ",".join(namespaces)
    for ns in namespaces:
        r = copy.deepcopy(role)
        r["kind"] = "Role"
        r["metadata"]["namespace"] = ns
        b = copy.deepcopy(binding)
        b["kind"] = "RoleBinding"
        b["metadata"]["namespace"] = ns
        b["roleRef"]["kind"] = "Role"
        out += [r, b]
    return out


def deletion_cost(namespaces):
    """manifests/scaler/rbac-deletion-cost.yaml as `kubectl apply -n NS -f` applies it."""
    with open(os.path.join(ROOT, "manifests/scaler/rbac-deletion-cost.yaml")) as f:
        objs = docs(f.read())
    out = []
    for ns in namespaces:
        for o in objs:
            if "namespace" in o["metadata"]:
                fail("rbac-deletion-cost.yaml names a namespace; it is applied with -n")
            o = copy.deepcopy(o)
            o["metadata"]["namespace"] = ns
            out.append(o)
    return out


def strings(node, path=""):
    """Every (path, key, string) under `node`."""
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, str):
                yield f"{path}.{k}", k, v
            else:
                yield from strings(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            if isinstance(v, str):
                yield f"{path}[{i}]", None, v
            else:
                yield from strings(v, f"{path}[{i}]")


def namespaces_from_the_release(chart):
    """Installed elsewhere, with everything on, nothing names namespace `infscale`: every
    namespace field is the release's (or a listed model namespace), and so is every Service
    address. The routes file and the alerts are data (ConfigMap data, the rules' text)."""
    values = {"tls": {"enabled": True, "certManager": {"enabled": True}},
              "observability": {"enabled": True}, "activator": {"namespaces": ["llm"]},
              "deletionCost": {"namespaces": ["llm"]}}
    objs = chart.render(values, name=RELEASE, namespace="elsewhere", is_install=True)
    for path, text in objs.items():
        if path.endswith("NOTES.txt"):
            continue
        for obj in docs(text):
            data = {k: v for k, v in obj.items() if k != "data" and obj["kind"] != "PrometheusRule"}
            for where, k, v in strings(data):
                if (k == "namespace" and v not in ("elsewhere", "llm")) or ".infscale.svc" in v:
                    fail(f"installed in namespace elsewhere, {show(key(obj))} {where} is {v!r}")


def main():
    helm.disable_logging()
    report = helm.lint(CHART, strict=True, namespace=NAMESPACE)
    # Severity 1 is information (e.g. "icon is recommended"); warnings and errors fail.
    bad = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
    if bad:
        fail(f"helm lint: {bad}")

    # values.schema.json refuses a misspelt or mistyped value instead of ignoring it.
    with helm.Chart.load(CHART) as chart:
        for bad in ({"tls": {"enable": True}}, {"activator": {"namespaces": "llm"}},
                    {"scaler": {"replica": 3}}, {"logFormat": "xml"}):
            try:
                chart.validate_schema(bad)
            except helm.HelmValuesError:
                continue
            fail(f"values.schema.json accepts {bad}")

    base = kustomize("manifests/scaler", "manifests/activator")
    tls = kustomize("manifests/scaler-tls", "manifests/activator")
    observability = kustomize("manifests/observability")
    cert_manager = [
        ("Issuer", NAMESPACE, "infscale-selfsigned"),
        ("Certificate", NAMESPACE, "infscale-ca"),
        ("Issuer", NAMESPACE, "infscale-ca"),
        ("Certificate", NAMESPACE, "infscale-server"),
        ("Certificate", NAMESPACE, "infscale-client"),
    ]
    models = ["llm", "team-b"]
    # (name, values, the bases' objects, objects only the chart makes, for that value set).
    value_sets = [
        ("default", {}, base, ()),
        ("tls (a provided Secret)", {"tls": {"enabled": True}}, tls, ()),
        # cert-manager's objects have no counterpart in the bases (gen-certs.sh makes files).
        ("tls with cert-manager", {"tls": {"enabled": True, "certManager": {"enabled": True}}},
         tls, cert_manager),
        ("observability", {"observability": {"enabled": True}}, base + observability, ()),
        ("activator per namespace", {"activator": {"namespaces": models}},
         per_namespace(copy.deepcopy(base), models), ()),
        ("deletion cost", {"deletionCost": {"namespaces": models}},
         base + deletion_cost(models), ()),
    ]

    os.makedirs(os.path.join(ROOT, "target", "chart"), exist_ok=True)
    package = helm.package(CHART, destination=os.path.join(ROOT, "target", "chart"))
    with tarfile.open(package) as tar:
        for inside, source in SHARED_FILES.items():
            member = tar.extractfile(f"infscale/{inside}")
            with open(os.path.join(ROOT, source), "rb") as f:
                if member is None or member.read() != f.read():
                    fail(f"{package}: infscale/{inside} is not {source}")

    objects = 0
    with helm.Chart.load(CHART) as chart, helm.Chart.load(package) as packaged:
        for name, values, want, chart_only in value_sets:
            got = render(chart, values)
            if render(packaged, values) != got:
                fail(f"value set {name!r}: the packaged chart renders otherwise than the directory")
            matched = compare(name, got, want, chart_only)
            print(f"chart: {name}: {matched} objects equal the bases'"
                  + (f", {len(chart_only)} only the chart's" if chart_only else ""))
            objects += matched
        namespaces_from_the_release(chart)
        # The cert-manager set: the Secret the server Certificate writes is the one mounted.
        got = {key(o): o for o in render(chart, value_sets[2][1])}
        secret = got[("Certificate", NAMESPACE, "infscale-server")]["spec"]["secretName"]
        volumes = got[("Deployment", NAMESPACE, "infscale")]["spec"]["template"]["spec"]["volumes"]
        if volumes[0]["secret"]["secretName"] != secret:
            fail(f"the server Certificate writes {secret}, the scaler mounts {volumes}")

    print(f"chart: packaged {os.path.relpath(package, ROOT)}")
    print(f"chart: {objects} objects match kustomize in {len(value_sets)} value sets")


if __name__ == "__main__":
    main()
