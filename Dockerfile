# The hami-rs image that charts/hami-rs deploys, and the load generator as a second target:
#
#   docker build -t ghcr.io/hami-rs/hami-rs:0.1.0 .
#   docker build --target loadtest -t ghcr.io/hami-rs/hami-loadtest:0.1.0 .
#
# HAMI_RS_REVISION and HAMI_RS_BUILD_DATE, when given as build arguments, end up in the
# hami_build_info metric. tests/dockerfile.sh lints this file.

# The toolchain the project's CI builds and tests with; at least Cargo.toml's rust-version.
# Bookworm, so the binary needs no newer glibc than the Debian 12 runtime image has.
ARG RUST_VERSION=1.95.0

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# The workspace: the scheduler, its pure core (crates/hami-core) and loadtest/ (hami-loadtest);
# cargo reads every member's manifest for either image.
COPY Cargo.toml Cargo.lock ./
COPY src src
COPY crates/hami-core crates/hami-core
COPY loadtest loadtest
ARG HAMI_RS_REVISION=unknown
ARG HAMI_RS_BUILD_DATE=unknown
# The dist profile is release without debug info or symbols. The registry and target directory are
# cache mounts so a source change does not rebuild every dependency; the target directory is not part
# of the layer, hence the copy out in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked --bin hami-rs --bin kubectl-hami \
    && install -D -m 0755 target/dist/hami-rs /out/hami-rs \
    && install -D -m 0755 target/dist/kubectl-hami /out/kubectl-hami

FROM build AS build-loadtest
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked --bin hami-loadtest \
    && install -D -m 0755 target/dist/hami-loadtest /out/hami-loadtest

# The load generator starts hami-rs itself, so it gets both binaries. The PNG report has no text
# here: the image has no fonts.
FROM gcr.io/distroless/cc-debian12:nonroot AS loadtest
COPY --from=build /out/hami-rs /usr/local/bin/hami-rs
COPY --from=build-loadtest /out/hami-loadtest /usr/local/bin/hami-loadtest
USER 65532:65532
# Writable by the nonroot user, for --json-out and --plot-out (the children's files go to /tmp).
WORKDIR /home/nonroot
ENTRYPOINT ["/usr/local/bin/hami-loadtest"]
CMD ["--help"]

# Last, so a plain `docker build` gives this one. distroless/cc has glibc, libgcc_s and CA
# certificates and nothing else: no shell, no package manager. 65532 is its nonroot user and the
# chart's scheduler.runAsUser; numeric, so runAsNonRoot can be checked without an /etc/passwd lookup.
# Nothing is written outside /tmp (an emptyDir in the chart), so a read-only root filesystem works.
# kubectl-hami is there too: `kubectl exec deploy/<release>-hami-rs -c hami-rs -- kubectl-hami top
# nodes` runs it in-cluster with the scheduler's ServiceAccount (which may read nodes and pods; `why`
# also lists Events and reads the Deployment, which that account may not).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/hami-rs /usr/local/bin/hami-rs
COPY --from=build /out/kubectl-hami /usr/local/bin/kubectl-hami
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/hami-rs"]
CMD ["--help"]
