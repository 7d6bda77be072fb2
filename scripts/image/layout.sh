#!/usr/bin/env bash
# Prints what a user of infscale's image depends on, for one image in podman's storage: its
# user, entrypoint, command, ports and labels, and the files infscale needs (the binary, the
# infscale-sim link, the nonroot user, CA certificates, /tmp). Two images with the same layout
# print the same text: the release workflow diffs the Dockerfile's image against
# scripts/image/build.sh's.
#
#   scripts/image/layout.sh IMAGE
set -euo pipefail
image=${1:?usage: scripts/image/layout.sh IMAGE}
podman=(podman)
[ -n "${STORAGE_DRIVER:-}" ] && podman+=(--storage-driver "$STORAGE_DRIVER")

"${podman[@]}" image inspect -f 'user: {{.Config.User}}
entrypoint: {{json .Config.Entrypoint}}
cmd: {{json .Config.Cmd}}
label title: {{index .Config.Labels "org.opencontainers.image.title"}}
label version: {{index .Config.Labels "org.opencontainers.image.version"}}
label source: {{index .Config.Labels "org.opencontainers.image.source"}}
label licenses: {{index .Config.Labels "org.opencontainers.image.licenses"}}' "$image"
# shellcheck disable=SC2016 # a Go template, not a shell expansion
"${podman[@]}" image inspect -f '{{range $p, $_ := .Config.ExposedPorts}}{{$p}} {{end}}' "$image" \
  | tr ' ' '\n' | sed '/^$/d; s,/tcp$,,' | sort | tr '\n' ' ' | sed 's/^/ports: /; s/ $/\n/'

ctr=$("${podman[@]}" create "$image")
trap '"${podman[@]}" rm "$ctr" >/dev/null' EXIT
"${podman[@]}" export "$ctr" | python3 -c '
import sys, tarfile
want = {"usr/local/bin/infscale", "usr/local/bin/infscale-sim", "etc/passwd", "etc/group",
        "etc/ssl/certs/ca-certificates.crt", "tmp"}
seen, passwd, group = {}, "", ""
with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as t:
    for m in t:
        name = m.name.lstrip("./").rstrip("/")
        if name in want:
            kind = "dir" if m.isdir() else "link -> " + m.linkname if m.issym() else "file"
            seen[name] = "%s %s" % (kind, oct(m.mode & 0o7777)[2:] if not m.issym() else "")
            if name in ("etc/passwd", "etc/group"):
                f = t.extractfile(m)
                text = f.read().decode() if f else ""
                if name == "etc/passwd": passwd = text
                else: group = text
for name in sorted(want):
    print("/%s: %s" % (name, seen.get(name, "MISSING").strip()))
print("passwd 65532: " + " ".join(l.split(":")[0] + ":" + l.split(":")[3]
      for l in passwd.splitlines() if l.split(":")[2:3] == ["65532"]))
print("group 65532: " + " ".join(l.split(":")[0] for l in group.splitlines()
      if l.split(":")[2:3] == ["65532"]))
'
