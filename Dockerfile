# infscale: one image for `infscale serve` (the KEDA external scaler) and `infscale activator`.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto proto
COPY src src
COPY benches benches
COPY fixtures fixtures
RUN cargo build --release --locked --bin infscale --bin infscale-sim

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/infscale /src/target/release/infscale-sim /usr/local/bin/
USER 65532:65532
EXPOSE 9090 9091 8080 9092
ENTRYPOINT ["/usr/local/bin/infscale"]
CMD ["serve"]
