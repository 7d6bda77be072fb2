# infscale: one image for `infscale serve` (the KEDA external scaler) and `infscale activator`.
# One binary: `infscale-sim` is a symlink to it (called by that name it is the tuning CLI).
# For users with Docker: `docker build --build-arg VERSION=0.1.0 -t infscale .`. Releases are
# built by scripts/image/build.sh (no daemon, no base image; docs/image.md) into the same layout:
# /usr/local/bin/infscale and the symlink, glibc, libgcc, CA certificates, user 65532.
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto proto
COPY src src
COPY crates crates
COPY benches benches
COPY fixtures fixtures
# The chart's values: the binary's reference pages (docs/chart.md) are written from them.
COPY charts/infscale/values.yaml charts/infscale/values.yaml
RUN cargo build --release --locked --bin infscale \
    && mkdir /out \
    && cp target/release/infscale /out/infscale \
    && ln -s infscale /out/infscale-sim

# glibc, libgcc and CA certificates only: no shell, no package manager (Debian 12, as the build
# stage, so the binary's glibc matches). Its nonroot user is 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
# The release's version (Cargo.toml's), for the label only.
ARG VERSION
LABEL org.opencontainers.image.title="infscale" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/infscale/infscale" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
EXPOSE 9090 9091 8080 9092
ENTRYPOINT ["/usr/local/bin/infscale"]
CMD ["serve"]
