# gaptrain's image for those who build with Docker (docs/image.md):
#   docker build -t ghcr.io/gaptrain/gaptrain:0.1.0 .
# The same layout as scripts/build-image.sh's archive, from the same scripts:
# the -c opt builds of //image:binaries in /usr/local/bin; only the Debian
# packages that own a library they load (image/runtime-packages.sh,
# image/fetch-debs.sh); image/rootfs-setup.sh's user gaptrain (65532), the
# pods' directories and no documentation; no entrypoint, `gaptrain --help`
# by default. The one difference: the runtime stage starts from
# debian:12-slim (apt and a few more essential packages) where
# scripts/build-image.sh starts from mmdebstrap's smaller essential set, as
# a Docker build cannot chroot.
#
# RUNTIME_BASE swaps the runtime stage's base (docs/image.md, "GPU").

ARG BUILD_BASE=debian:12
ARG RUNTIME_BASE=debian:12-slim

FROM ${BUILD_BASE} AS build
WORKDIR /src
COPY scripts/bootstrap.sh scripts/
RUN scripts/bootstrap.sh
COPY . .
# binaries.txt names them relative to bazel-bin.
RUN bazel build -c opt //image:binaries //image:binaries_list && \
    bin=$(bazel info -c opt bazel-bin) && \
    mkdir -p /out/bin && \
    sed "s#^#$bin/#" "$bin/image/binaries.txt" | xargs cp -t /out/bin/ && \
    chmod 0755 /out/bin/* && \
    image/runtime-packages.sh /out/bin/* > /out/packages.txt && \
    image/fetch-debs.sh /out/packages.txt /out/debs

FROM ${RUNTIME_BASE}
COPY --from=build /out/debs /tmp/gaptrain-debs
COPY image/rootfs-setup.sh /tmp/gaptrain-rootfs-setup.sh
RUN sh /tmp/gaptrain-rootfs-setup.sh /tmp/gaptrain-debs && \
    rm -rf /tmp/gaptrain-debs /tmp/gaptrain-rootfs-setup.sh /var/lib/apt/lists/*
COPY --from=build /out/bin/ /usr/local/bin/
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin OPENBLAS_NUM_THREADS=1
USER 65532:65532
WORKDIR /var/lib/gaptrain
CMD ["gaptrain", "--help"]
