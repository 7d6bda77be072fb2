# infscale: one image for `infscale serve` (the KEDA external scaler) and `infscale activator`.
# One binary: `infscale-sim` is a symlink to it (called by that name it is the tuning CLI).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto proto
COPY src src
COPY crates crates
COPY benches benches
COPY fixtures fixtures
RUN cargo build --release --locked --bin infscale \
    && mkdir /out \
    && cp target/release/infscale /out/infscale \
    && ln -s infscale /out/infscale-sim

# glibc, libgcc and CA certificates only: no shell, no package manager (Debian 12, as the build
# stage, so the binary's glibc matches). Its nonroot user is 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
EXPOSE 9090 9091 8080 9092
ENTRYPOINT ["/usr/local/bin/infscale"]
CMD ["serve"]
