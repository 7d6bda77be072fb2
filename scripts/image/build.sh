#!/usr/bin/env bash
# Builds infscale's OCI image without a Docker daemon and without pulling a base image: FROM
# scratch, with the Dockerfile's layout (the release binary at /usr/local/bin/infscale, the
# infscale-sim symlink, the glibc and libgcc it links against copied from this machine, CA
# certificates, a nonroot user 65532, /tmp), user 65532:65532, ENTRYPOINT infscale, CMD serve.
#
#   scripts/image/build.sh [--binary PATH] [--tag REF] [--arch amd64|arm64]
#
# Without --binary it runs `cargo build --release --locked --bin infscale`. The result is kept
# three ways: target/image/infscale-VERSION.oci.tar (an OCI archive: `skopeo copy`, `kind load
# image-archive`), target/image/oci (an OCI layout directory) and the local container storage
# (`podman run REF`). Its size (compressed layer bytes, unpacked bytes) is printed and written
# to target/image/size.txt. Needs root (buildah mounts the image); installs buildah, skopeo and
# umoci with apt-get when missing. STORAGE_DRIVER (vfs, overlay) is passed to buildah/podman.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
[ -n "$version" ] || { echo "build.sh: no package version in Cargo.toml" >&2; exit 1; }
binary=""
tag="ghcr.io/infscale/infscale:$version"
arch=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

need=()
command -v buildah >/dev/null || need+=(buildah)
command -v skopeo >/dev/null || need+=(skopeo)
command -v umoci >/dev/null || need+=(umoci)
command -v ldd >/dev/null || need+=(libc-bin)
[ -f /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
if [ ${#need[@]} -gt 0 ]; then
  echo "build.sh: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi

if [ -z "$binary" ]; then
  cargo build --release --locked --bin infscale
  binary=${CARGO_TARGET_DIR:-target}/release/infscale
fi
[ -x "$binary" ] || { echo "build.sh: $binary is not an executable" >&2; exit 1; }
if [ -z "$arch" ]; then
  case "$(uname -m)" in
    x86_64) arch=amd64 ;;
    aarch64) arch=arm64 ;;
    *) echo "build.sh: unknown machine $(uname -m); pass --arch" >&2; exit 1 ;;
  esac
fi

out=$repo/target/image
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$out" "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/home/nonroot"

# The binary and the name that makes it the tuning CLI.
install -m 0755 "$binary" "$root/usr/local/bin/infscale"
ln -s infscale "$root/usr/local/bin/infscale-sim"

# Every shared object the binary loads, and the loader its ELF header names, at the paths this
# machine resolves them to (copied as files: the image has no /lib -> usr/lib symlink).
libs=$(ldd "$binary" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}')
[ -n "$libs" ] || { echo "build.sh: ldd found no libraries for $binary (static?)" >&2; exit 1; }
for lib in $libs; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
# Name lookups (Kubernetes Service names) through files, then DNS, as distroless sets it.
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
chmod 1777 "$root/tmp"

# One layer: numeric owners, the commit's time (SOURCE_DATE_EPOCH) on the files. buildah writes
# the layer again at commit, so two builds of one binary differ in its digest.
git=(git -c "safe.directory=$repo")
epoch=${SOURCE_DATE_EPOCH:-$("${git[@]}" log -1 --format=%ct 2>/dev/null || echo 0)}
revision=$("${git[@]}" rev-parse HEAD 2>/dev/null || echo unknown)
mapfile -t top < <(cd "$root" && ls -A)
tar -C "$root" --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$epoch" \
  -cf "$work/rootfs.tar" "${top[@]}"
# /home/nonroot belongs to the user, as in distroless (nothing is written there at run time).
tar -C "$root" --numeric-owner --owner=65532 --group=65532 --mtime="@$epoch" \
  -cf "$work/home.tar" home/nonroot

export STORAGE_DRIVER=${STORAGE_DRIVER:-}
ctr=$(buildah from --arch "$arch" scratch)
cleanup() { buildah rm "$ctr" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
buildah add --quiet "$ctr" "$work/rootfs.tar" / >/dev/null
buildah add --quiet "$ctr" "$work/home.tar" / >/dev/null
buildah config \
  --arch "$arch" --os linux \
  --user 65532:65532 \
  --workingdir / \
  --created-by "scripts/image/build.sh: one layer of files from the build host" \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --entrypoint '["/usr/local/bin/infscale"]' \
  --cmd serve \
  --port 9090/tcp --port 9091/tcp --port 8080/tcp --port 9092/tcp \
  --label org.opencontainers.image.title=infscale \
  --label "org.opencontainers.image.description=$(sed -n 's/^description = "\(.*\)"$/\1/p' Cargo.toml | head -n1)" \
  --label "org.opencontainers.image.version=$version" \
  --label org.opencontainers.image.source=https://github.com/infscale/infscale \
  --label "org.opencontainers.image.revision=$revision" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  "$ctr"
# The previous image of this tag goes (unless a container uses it), not left behind untagged.
buildah rmi "$tag" >/dev/null 2>&1 || true
buildah commit --quiet --timestamp "$epoch" --format oci --rm "$ctr" "$tag" >/dev/null
trap 'rm -rf "$work"' EXIT

archive=$out/infscale-$version-$arch.oci.tar
rm -rf "$archive" "$out/oci"
buildah push --quiet "$tag" "oci-archive:$archive:$tag" >/dev/null
buildah push --quiet "$tag" "oci:$out/oci:$version" >/dev/null

# Size: the compressed layer as a registry stores it (gzip, what a node pulls) and the unpacked
# filesystem.
manifest=$(skopeo inspect --raw "oci:$out/oci:$version")
compressed=$(printf '%s' "$manifest" | python3 -c 'import json,sys; m=json.load(sys.stdin); print(sum(l["size"] for l in m["layers"]))')
umoci raw unpack --rootless --image "$out/oci:$version" "$work/unpacked" >/dev/null 2>&1 \
  || umoci raw unpack --image "$out/oci:$version" "$work/unpacked" >/dev/null
unpacked=$(du -sb --apparent-size "$work/unpacked" | cut -f1)
binary_bytes=$(stat -c %s "$binary")
{
  echo "image $tag ($arch)"
  echo "layer (compressed, pulled): $compressed bytes ($(numfmt --to=iec-i --format=%.1f "$compressed"))"
  echo "unpacked filesystem: $unpacked bytes ($(numfmt --to=iec-i --format=%.1f "$unpacked"))"
  echo "of which the binary: $binary_bytes bytes ($(numfmt --to=iec-i --format=%.1f "$binary_bytes"))"
} | tee "$out/size.txt"
echo "archive: $archive"
echo "layout:  $out/oci:$version"
echo "storage: $tag"
