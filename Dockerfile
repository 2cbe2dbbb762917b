# One image for both processes: `plumb-agent` (DaemonSet) and `plumb serve` (aggregator).
# The agent needs only the base dependencies; the aggregator extra is installed beside them
# and the agent never imports it. Build: docker build -t plumb:0.1.0 .
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY agent ./agent
COPY aggregator ./aggregator
COPY proto ./proto
RUN python -m venv /opt/plumb \
 && /opt/plumb/bin/pip install --upgrade pip \
 && /opt/plumb/bin/pip install '.[aggregator]'

FROM python:3.11-slim-bookworm
# PLUMB_RECIPES__DIR: recipes/ is data beside the code, not package data, so the image
# ships it once and points the aggregator at it.
ENV PATH=/opt/plumb/bin:$PATH \
    PLUMB_RECIPES__DIR=/opt/plumb/share/plumb/recipes \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/plumb /opt/plumb
COPY recipes /opt/plumb/share/plumb/recipes
# A fixed non-root uid/gid that matches the chart's runAsUser/runAsGroup (65532).
RUN groupadd --system --gid 65532 plumb \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin plumb
USER 65532:65532
WORKDIR /tmp
EXPOSE 7443 8080
# The chart sets the command: ["plumb-agent"] or ["plumb", "serve"].
CMD ["plumb", "--help"]
