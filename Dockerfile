# Build: a release binary from the locked dependency graph. protox compiles the protos, so no protoc.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# The whole tree, less what .dockerignore leaves out (VCS, build outputs, docs, deploy files):
# everything Cargo.toml names (benches, examples, tests) comes along as it is added. CI
# (.ci/docker_context.py) rebuilds from exactly this context, so a missing file fails there.
COPY . .
# `--build-arg FEATURES=otel` adds OpenTelemetry export (--otlp-endpoint).
ARG FEATURES=""
RUN cargo build --release --locked --bin a2a-server --features "$FEATURES"
# Ship a stripped binary (the release profile keeps line tables for backtraces, which makes it
# several times larger). The symbols stay in this stage, linked by a .gnu_debuglink, for
# debuggers and symbolizers: `docker build --target debug-symbols --output type=local,dest=out .`
RUN cd target/release \
    && objcopy --only-keep-debug a2a-server a2a-server.debug \
    && objcopy --strip-debug --strip-unneeded --add-gnu-debuglink=a2a-server.debug a2a-server

# The symbols alone, exported only on request (see above).
FROM scratch AS debug-symbols
COPY --from=build /src/target/release/a2a-server.debug /

# Run: a slim image, an unprivileged user, one port for every binding.
FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --no-create-home a2a
COPY --from=build /src/target/release/a2a-server /usr/local/bin/a2a-server
USER 10001
ENV A2A_LISTEN=0.0.0.0:50051
EXPOSE 50051
ENTRYPOINT ["/usr/local/bin/a2a-server"]
