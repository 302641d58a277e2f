# pstrain in a container: Debian bookworm and Debian's packages only.
#   docker build -t pstrain:0.2.0 .        (or: podman build / buildah bud)
#   docker run --rm pstrain:0.2.0 pstrain local \
#     --config /usr/local/share/pstrain/configs/lenet_fashion_mnist.yaml --servers 2 --workers 2
# BASE: where no registry is reachable, make a base image locally (docs/deployment.md,
# "In a container") and pass --build-arg BASE=localhost/debian:bookworm.
ARG BASE=debian:bookworm

# Build stage: compilers and the -dev packages; none of it reaches the image.
FROM ${BASE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake g++ make pkg-config libuv1-dev libflatbuffers-dev flatbuffers-compiler \
      libeigen3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev zlib1g-dev libssl-dev \
      libcli11-dev nlohmann-json3-dev librocksdb-dev \
 && rm -rf /var/lib/apt/lists/*
COPY . /src
# PSTRAIN_NATIVE=OFF: the image runs on CPUs other than the builder's, and an
# -march=native binary dies there with an illegal instruction.
RUN cmake -S /src -B /src/build -DCMAKE_BUILD_TYPE=Release -DPSTRAIN_NATIVE=OFF -DBUILD_TESTING=OFF \
 && cmake --build /src/build -j "$(nproc)" --target pstrain \
 && DESTDIR=/stage cmake --install /src/build --prefix /usr/local

# Runtime stage: the shared libraries pstrain links and the Fashion-MNIST
# package the example configs read (/usr/share/datasets/fashion-mnist), so the
# main job runs as it is; other data comes in through a volume.
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libuv1 libyaml-cpp0.7 libspdlog1.10 libfmt9 zlib1g libssl3 librocksdb7.8 dataset-fashion-mnist \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /stage/usr/local /usr/local
# Fails the build here, not on a cluster, when a runtime library is missing.
RUN pstrain --help > /dev/null \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /home/pstrain pstrain \
 && install -d -o pstrain -g pstrain /work /data /checkpoints
USER 10001:10001
# Logs and metrics go to the working directory unless PSTRAIN_LOG_DIR says.
WORKDIR /work
CMD ["pstrain", "--help"]
