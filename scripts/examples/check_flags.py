#!/usr/bin/env python3
"""Checks that every flag, environment variable, probe path, metrics path and options-file key an
example passes to its model server exists in the pinned version of that server.

Run by scripts/examples/check-flags.sh, which downloads the servers' packages (into the cache
directory given as --cache). The image each example's container pins is looked up in
scripts/examples/pins.tsv, which names the package version carrying the same server's source; that
source is read statically (Python's ast, regular expressions over C++), never imported.

Exit status: 0 when everything exists; 1 naming each example, container and item that does not.
"""

import argparse
import ast
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# A route that a server mounts only when an option is on: (server, route) -> what turns it on.
# Without it the path answers 404 and the scaler reads nothing.
ROUTE_NEEDS = {
    ("vllm", "/metrics"): None,
    ("sglang", "/metrics"): ("flag", "--enable-metrics"),
    ("llamacpp", "/metrics"): ("flag", "--metrics"),
}

# huggingface_hub's version for HF_* variables where a server's wheel names no floor (pins.tsv).
HF_HUB_FALLBACK = [None]
VERBOSE = [False]

FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9_.-]*$")
PY_ROUTE = re.compile(
    r"""(?:\.(?:get|post|api_route|add_api_route|add_get)\s*\(|add_api_route\s*\(|Mount\s*\()\s*["'](/[^"']*)["']"""
)


class Failure(Exception):
    pass


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def pip_download(spec, dest, extra=()):
    """Downloads one distribution (no dependencies) into dest unless a file is already there."""
    dest.mkdir(parents=True, exist_ok=True)
    have = [p for p in dest.iterdir() if p.suffix in (".whl", ".gz")]
    if have:
        return have[0]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", spec, "-d", str(dest), *extra]
    try:
        run(cmd)
    except subprocess.CalledProcessError as e:
        raise Failure(f"pip download {spec} failed:\n{e.stderr.strip()}") from e
    have = [p for p in dest.iterdir() if p.suffix in (".whl", ".gz")]
    if not have:
        raise Failure(f"pip download {spec} left no file in {dest}")
    return have[0]


def unzip(wheel, dest, prefixes):
    """Extracts the members under prefixes once (a marker file records it)."""
    marker = dest / ".extracted"
    if marker.exists():
        return
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(tuple(prefixes)) or name.endswith(".dist-info/METADATA"):
                z.extract(name, dest)
    marker.write_text("")


# ---------------------------------------------------------------- Python sources


def py_files(base, rels):
    for rel in rels:
        p = base / rel
        if p.is_dir():
            yield from sorted(p.rglob("*.py"))
        elif p.exists():
            yield p


def strings_in(node):
    """String constants in node, itself or inside a list/tuple."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.List, ast.Tuple)):
        for e in node.elts:
            yield from strings_in(e)


def call_name(call):
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def argparse_flags(tree, calls=("add_argument",), keywords=("aliases", "flags", "cli_name")):
    """Flag strings passed to argparse add_argument (positionally) or named in keywords of calls."""
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = call_name(node)
        if name in calls:
            for a in node.args:
                out.update(s for s in strings_in(a) if FLAG.match(s))
        for kw in node.keywords:
            if kw.arg in keywords:
                out.update(s for s in strings_in(kw.value) if FLAG.match(s))
    # dicts built for add_argument(**kwargs), e.g. {"flags": ["-O"]}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value in keywords:
                    out.update(s for s in strings_in(v) if FLAG.match(s))
    return out


def class_fields(tree, classes):
    """{class name: (base names, [(field, annotation node)])} for the named classes (None: all)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and (classes is None or node.name in classes):
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
            fields = [
                (s.target.id, s.annotation)
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            ]
            out[node.name] = (bases, fields)
    return out


def dashed(name):
    return "--" + name.replace("_", "-")


def py_routes(files):
    routes = set()
    for f in files:
        routes.update(PY_ROUTE.findall(f.read_text(errors="replace")))
    return routes


def py_env_names(files):
    """Environment variable names a Python package reads or declares."""
    names = set()
    pat = re.compile(r"""["']([A-Z][A-Z0-9_]{2,})["']""")
    for f in files:
        names.update(pat.findall(f.read_text(errors="replace")))
    return names


# ---------------------------------------------------------------- the servers


class Server:
    """What one pinned server accepts: flags, env names, routes, option-file keys."""

    def __init__(self, label):
        self.label = label
        self.flags = set()
        self.env = set()
        self.routes = set()
        self.route_needs = {}
        self.options = set()


def hf_hub_env(cache, metadata_text, fallback):
    """HF_* variables huggingface_hub reads (HF_TOKEN: the model download's credentials), at the
    oldest version the server's wheel accepts, or pins.tsv's huggingface_hub row where the wheel
    names no floor of its own (it takes huggingface_hub through transformers)."""
    m = re.search(r"^Requires-Dist: huggingface[-_]hub\s*>=\s*([0-9][0-9.]*)", metadata_text, re.M | re.I)
    version = m.group(1) if m else fallback
    if not version:
        raise Failure("no huggingface_hub version to check HF_* variables against (pins.tsv row)")
    dest = cache / f"huggingface_hub-{version}"
    wheel = pip_download(f"huggingface_hub=={version}", dest, ["--only-binary", ":all:"])
    src = dest / "src"
    files = ["huggingface_hub/constants.py", "huggingface_hub/utils/_auth.py"]
    unzip(wheel, src, files)
    reads = re.compile(r"""(?:environ\.get|getenv)\(\s*["']([A-Z][A-Z0-9_]+)["']|environ\[\s*["']([A-Z][A-Z0-9_]+)["']""")
    names = set()
    for f in files:
        if (src / f).exists():
            for a, b in reads.findall((src / f).read_text(errors="replace")):
                names.add(a or b)
    return version, names


def metadata_of(src):
    found = list(src.glob("*.dist-info/METADATA"))
    return found[0].read_text(errors="replace") if found else ""


def load_vllm(cache, version):
    dest = cache / f"vllm-{version}"
    wheel = pip_download(f"vllm=={version}", dest, ["--only-binary", ":all:"])
    src = dest / "src"
    unzip(wheel, src, ["vllm/engine/arg_utils.py", "vllm/entrypoints/", "vllm/envs.py"])
    s = Server(f"vllm {version}")
    base = src / "vllm"
    # `vllm serve`'s parser: EngineArgs, the frontend's cli_args.py (its place moved between
    # releases), and serve's own subcommand.
    serve = [base / "engine/arg_utils.py", base / "entrypoints/cli/serve.py",
             *sorted((base / "entrypoints").rglob("cli_args.py"))]
    for f in [p for p in serve if p.exists()]:
        tree = ast.parse(f.read_text())
        s.flags |= argparse_flags(tree)
        # Frontend arguments are dataclass fields turned into --field-name by get_kwargs(cls).
        if f.name == "cli_args.py":
            fields = class_fields(tree, None)
            for cls in ("FrontendArgs", "BaseFrontendArgs"):
                if cls in fields:
                    s.flags |= {dashed(n) for n, _ in fields[cls][1]}
    s.routes = py_routes(py_files(base, ["entrypoints"]))
    s.env = py_env_names([base / "envs.py"])
    hub, names = hf_hub_env(cache, metadata_of(src), HF_HUB_FALLBACK[0])
    s.env |= names
    s.label += f" (HF_* from huggingface_hub {hub})"
    return s


def load_sglang(cache, version):
    dest = cache / f"sglang-{version}"
    # One fixed file whatever the host's Python: the wheel is built per CPython version.
    wheel = pip_download(
        f"sglang=={version}",
        dest,
        ["--only-binary", ":all:", "--python-version", "3.11", "--implementation", "cp",
         "--abi", "cp311", "--platform", "manylinux_2_34_x86_64"],
    )
    src = dest / "src"
    unzip(wheel, src, ["sglang/srt/server_args.py", "sglang/srt/arg_groups/", "sglang/srt/entrypoints/",
                       "sglang/srt/utils/", "sglang/srt/environ.py"])
    s = Server(f"sglang {version}")
    base = src / "sglang/srt"
    for f in [base / "server_args.py", *py_files(base, ["arg_groups"])]:
        tree = ast.parse(f.read_text())
        s.flags |= argparse_flags(tree, calls=("add_argument",), keywords=("aliases", "cli_name"))
        # ServerArgs fields annotated A[T, "help"] or A[T, Arg(...)] become --field-name, unless
        # Arg(no_cli=True) or Arg(cli_name=...) says otherwise (add_cli_args_from_dataclass).
        for _, (_, fields) in class_fields(tree, None).items():
            for name, ann in fields:
                if not (isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") == "A"):
                    continue
                meta = ann.slice.elts[1] if isinstance(ann.slice, ast.Tuple) and len(ann.slice.elts) > 1 else None
                if isinstance(meta, ast.Call):
                    kws = {k.arg: k.value for k in meta.keywords}
                    if isinstance(kws.get("no_cli"), ast.Constant) and kws["no_cli"].value is True:
                        continue
                    if "cli_name" in kws:
                        continue  # its literal was collected above
                s.flags.add(dashed(name))
    s.routes = py_routes(py_files(base, ["entrypoints", "utils"]))
    s.env = py_env_names([base / "environ.py"])
    hub, names = hf_hub_env(cache, metadata_of(src), HF_HUB_FALLBACK[0])
    s.env |= names
    s.label += f" (HF_* from huggingface_hub {hub})"
    return s


def load_llamacpp(cache, version, note):
    dest = cache / f"llama-cpp-python-{version}"
    sdist = pip_download(f"llama-cpp-python=={version}", dest, ["--no-binary", "llama-cpp-python"])
    src = dest / "src"
    if not (src / ".extracted").exists():
        src.mkdir(parents=True, exist_ok=True)
        members = ["*/CHANGELOG.md", "*/vendor/llama.cpp/common/arg.cpp", "*/vendor/llama.cpp/tools/server/*.cpp"]
        run(["tar", "-xzf", str(sdist), "-C", str(src), "--strip-components=1", "--wildcards", *members])
        (src / ".extracted").write_text("")
    # The table names the llama.cpp commit (and so the image's build number); the sdist must vendor it.
    commit = re.search(r"llama\.cpp@([0-9a-f]{7,40})", note)
    changelog = (src / "CHANGELOG.md").read_text(errors="replace")
    section = re.search(rf"^## \[{re.escape(version)}\]\n(.*?)(?=^## \[)", changelog, re.M | re.S)
    if not commit or not section or commit.group(1) not in section.group(1):
        raise Failure(
            f"llama-cpp-python {version}: its CHANGELOG does not name llama.cpp@{commit.group(1) if commit else '?'}"
            " as pins.tsv says; fix the table's commit and the image's build number together"
        )
    s = Server(f"llama.cpp@{commit.group(1)} (llama-cpp-python {version})")
    arg = (src / "vendor/llama.cpp/common/arg.cpp").read_text(errors="replace")
    # One add_opt(common_arg(...)) per option: its names, its env variable, the tools it is for.
    for block in arg.split("add_opt(common_arg(")[1:]:
        block = block.split("add_opt(", 1)[0]
        head = block.split("[](", 1)[0]
        tools = re.search(r"set_examples\(\{([^}]*)\}", block)
        if tools and not re.search(r"LLAMA_EXAMPLE_(SERVER|COMMON)\b", tools.group(1)):
            continue
        for brace in re.findall(r"\{([^{}]*)\}", head):
            s.flags.update(n for n in re.findall(r'"([^"]+)"', brace) if FLAG.match(n))
        s.env.update(re.findall(r'set_env\("([A-Z0-9_]+)"\)', block))
    for f in sorted((src / "vendor/llama.cpp/tools/server").glob("*.cpp")):
        s.routes.update(re.findall(r'\.(?:get|post)\s*\(\s*"(/[^"]*)"', f.read_text(errors="replace")))
    return s


def load_recorded(path, label):
    s = Server(label)
    for line in path.read_text().splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        kind, name, rest = parts[0], parts[1], parts[2:]
        if kind == "flag":
            s.flags.add(name)
        elif kind == "option":
            s.options.add(name)
        elif kind == "env":
            s.env.add(name)
        elif kind == "route":
            s.routes.add(name)
            if rest[:1] == ["needs-option"]:
                s.route_needs[name] = ("option", rest[1])
    return s


def load_infscale(cache):
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binary = target / "debug/infscale"
    if not binary.exists():
        run(["cargo", "build", "-q", "--bin", "infscale"], cwd=ROOT)
    s = Server("infscale emulate (this tree)")
    helptext = run([str(binary), "emulate", "--help"]).stdout
    s.flags = set(re.findall(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)", helptext))
    s.flags.add("emulate")  # the subcommand itself
    for f in sorted((ROOT / "src/emulate").glob("*.rs")):
        text = f.read_text()
        s.routes.update(re.findall(r'"(/[A-Za-z0-9_/.-]*)"', text))
    return s


def load_server(row, cache):
    image, package, version, note = row
    if package == "huggingface_hub":
        raise Failure(f"pins.tsv: image {image} maps to huggingface_hub, which is no server")
    if package == "vllm":
        return "vllm", load_vllm(cache, version)
    if package == "sglang":
        return "sglang", load_sglang(cache, version)
    if package == "llama-cpp-python":
        return "llamacpp", load_llamacpp(cache, version, note)
    if package == "tensorrt-llm":
        rec = re.search(r"recorded:\s*(\S+)", note)
        s = load_recorded(ROOT / rec.group(1), f"trtllm-serve {version}, recorded list")
        hub, names = hf_hub_env(cache, "", HF_HUB_FALLBACK[0])
        s.env |= names
        s.label += f" (HF_* from huggingface_hub {hub})"
        return "trtllm", s
    if package == "infscale":
        return "emulate", load_infscale(cache)
    raise Failure(f"pins.tsv: no reader for package {package}")


# ---------------------------------------------------------------- the examples


def read_pins(path):
    rows = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 4:
            raise Failure(f"pins.tsv: want 4 tab-separated columns: {line!r}")
        if cols[1] == "huggingface_hub":
            HF_HUB_FALLBACK[0] = cols[2]
            continue
        rows[cols[0]] = cols
    return rows


def passed_flags(container):
    """Flags given to the server: args, and the command after its program (and `python -m MODULE`)."""
    cmd = list(container.get("command") or [])
    if cmd and os.path.basename(cmd[0]).startswith("python"):
        cmd = cmd[cmd.index("-m") + 2:] if "-m" in cmd else cmd[1:]
    else:
        cmd = cmd[1:]
    tokens = [str(t) for t in cmd + list(container.get("args") or [])]
    flags = []
    for i, t in enumerate(tokens):
        if t.startswith("-") and not re.match(r"^-\d", t):
            name, _, inline = t.partition("=")
            value = inline or (tokens[i + 1] if i + 1 < len(tokens) else None)
            flags.append((name, value))
    return tokens, flags


def probe_paths(container):
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        path = ((container.get(kind) or {}).get("httpGet") or {}).get("path")
        if path:
            yield kind, path


def options_file(docs, pod, container, path):
    """The YAML mapping a container reads at path, from the ConfigMap volume mounted over it."""
    for m in container.get("volumeMounts") or []:
        mount = m["mountPath"].rstrip("/")
        sub = m.get("subPath")
        if sub and path == mount:
            key = sub
        elif not sub and path.startswith(mount + "/"):
            key = path[len(mount) + 1:]
        else:
            continue
        vol = next((v for v in pod.get("volumes") or [] if v["name"] == m["name"]), None)
        cm_name = ((vol or {}).get("configMap") or {}).get("name")
        for d in docs:
            if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == cm_name:
                text = (d.get("data") or {}).get(key)
                if text is None:
                    raise Failure(f"ConfigMap {cm_name} has no key {key}")
                return cm_name, key, yaml.safe_load(text) or {}
    raise Failure(f"no ConfigMap volume in this file is mounted at {path}")


def metrics_paths_of(files):
    """{Deployment name: the path its ScaledObject's trigger scrapes}, from every example file
    (the vLLM Deployment and its ScaledObject are in two files)."""
    out = {}
    for f in files:
        for d in yaml.safe_load_all(f.read_text()):
            if d and d.get("kind") == "ScaledObject":
                for t in d["spec"].get("triggers", []):
                    md = t.get("metadata", {})
                    out[md.get("deployment")] = md.get("metricsPath", "/metrics")
    return out


def check_file(path, pins, servers, cache, metrics_paths):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    lines, failures = [], []
    for d in docs:
        if d.get("kind") not in ("Deployment", "StatefulSet"):
            continue
        pod = d["spec"]["template"]["spec"]
        for c in pod["containers"]:
            image = c["image"]
            row = pins.get(image)
            if row is None:
                failures.append(f"{path.name}: container {c['name']}: image {image} is not in scripts/examples/pins.tsv")
                continue
            if image not in servers:
                servers[image] = load_server(row, cache)
            kind, server = servers[image]
            checked, missing, seen = 0, [], []
            tokens, flags = passed_flags(c)
            given = {name for name, _ in flags}
            if kind == "emulate" and tokens[:1] == ["emulate"]:
                checked += 1
            for name, value in flags:
                checked += 1
                seen.append(name)
                if name not in server.flags:
                    missing.append(f"flag {name} does not exist")
                if kind == "trtllm" and name in ("--extra_llm_api_options", "--config") and value:
                    cm, key, opts = options_file(docs, pod, c, value)
                    for opt in opts:
                        checked += 1
                        seen.append(f"{key}:{opt}")
                        if opt not in server.options:
                            missing.append(f"option {opt} (ConfigMap {cm}, {key}) does not exist")
                    given |= {f"option:{k}" for k, v in opts.items() if v is True}
            for e in c.get("env") or []:
                checked += 1
                seen.append(f"${e['name']}")
                if e["name"] not in server.env:
                    missing.append(f"environment variable {e['name']} is read by neither the server nor huggingface_hub")
            routes = list(probe_paths(c))
            if d["metadata"]["name"] in metrics_paths:
                routes.append(("ScaledObject metricsPath", metrics_paths[d["metadata"]["name"]]))
            for what, route in routes:
                checked += 1
                seen.append(f"{what}:{route}")
                if route not in server.routes:
                    missing.append(f"{what} {route}: no such route")
                need = server.route_needs.get(route) or ROUTE_NEEDS.get((kind, route))
                if need:
                    checked += 1
                    want = need[1] if need[0] == "flag" else f"option:{need[1]}"
                    seen.append(f"{route} needs {need[1]}")
                    if want not in given:
                        missing.append(f"{what} {route}: served only with {need[0]} {need[1]}, which is not set")
            for m in missing:
                failures.append(f"{path.name}: container {c['name']} ({server.label}): {m}")
            lines.append(f"{path.name}: {c['name']} {image} -> {server.label}: {checked} checked, {len(missing)} missing")
            if VERBOSE[0]:
                lines.append("    " + " ".join(seen))
    return lines, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=ROOT / "target/examples-check")
    ap.add_argument("--pins", type=Path, default=HERE / "pins.tsv")
    ap.add_argument("-v", "--verbose", action="store_true", help="list what was checked")
    ap.add_argument("files", nargs="*", type=Path)
    a = ap.parse_args()
    VERBOSE[0] = a.verbose
    files = a.files or sorted((ROOT / "manifests/examples").glob("*.yaml"))
    pins, servers, failures = read_pins(a.pins), {}, []
    examples = sorted((ROOT / "manifests/examples").glob("*.yaml"))
    metrics = metrics_paths_of(sorted(set(examples) | set(files)))
    try:
        for f in files:
            lines, fails = check_file(f, pins, servers, a.cache, metrics)
            if not lines and not fails:
                print(f"{f.name}: no model server container")
            for line in lines:
                print(line)
            failures += fails
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    sys.stdout.flush()
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
