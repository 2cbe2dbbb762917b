# Two images from one file, one target each (the chart's agent.image and aggregator.image):
#   agent       plumb-agent and the base dependencies only: no web, database or CLI packages
#   aggregator  plumb serve and the CLI: the wheel with its `aggregator` extra
# `make images` builds both with the version and revision labels filled in:
#   docker build --target agent --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
#
# The base is pinned by tag and by the digest of its multi-platform index: a rebuilt tag
# cannot change the image under us. Update the two together.
ARG BASE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${BASE} AS wheel
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY agent ./agent
COPY aggregator ./aggregator
COPY proto ./proto
COPY recipes ./recipes
RUN pip wheel --no-deps -w /wheels .

FROM ${BASE} AS agent-venv
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=wheel /wheels /wheels
RUN set -- /wheels/plumb-*.whl \
 && python -m venv /opt/plumb \
 && /opt/plumb/bin/pip install "$1" \
 && /opt/plumb/bin/pip uninstall --yes pip

FROM ${BASE} AS aggregator-venv
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=wheel /wheels /wheels
RUN set -- /wheels/plumb-*.whl \
 && python -m venv /opt/plumb \
 && /opt/plumb/bin/pip install "$1[aggregator]" \
 && /opt/plumb/bin/pip uninstall --yes pip

# What both images share: the runtime, the fixed non-root user the chart's runAsUser and
# runAsGroup name (65532), and the labels that do not depend on the target.
FROM ${BASE} AS runtime
ARG VERSION=""
ARG REVISION=""
LABEL org.opencontainers.image.source="https://github.com/plumb-dev/plumb" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/plumb/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 65532 plumb \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin plumb
WORKDIR /tmp

FROM runtime AS agent
LABEL org.opencontainers.image.title="plumb-agent" \
      org.opencontainers.image.description="Plumb node agent: streams a GPU node's driver, CUDA, NCCL and GPU facts to the aggregator"
COPY --from=agent-venv /opt/plumb /opt/plumb
USER 65532:65532
ENTRYPOINT ["plumb-agent"]

# Last, so a plain `docker build .` gives the aggregator.
FROM runtime AS aggregator
LABEL org.opencontainers.image.title="plumb-aggregator" \
      org.opencontainers.image.description="Plumb aggregator: live GPU stack state, recipes, drift, metrics and the plumb CLI"
COPY --from=aggregator-venv /opt/plumb /opt/plumb
USER 65532:65532
EXPOSE 7443 8080
ENTRYPOINT ["plumb"]
CMD ["serve"]
