# One image for both processes: `plumb-agent` (DaemonSet) and `plumb serve` (aggregator).
# The agent needs only the base dependencies; the aggregator extra is installed beside them
# and the agent never imports it. Build: docker build -t plumb:0.1.0 .
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY agent ./agent
COPY aggregator ./aggregator
COPY proto ./proto
COPY recipes ./recipes
RUN python -m venv /opt/plumb \
 && /opt/plumb/bin/pip install --upgrade pip \
 && /opt/plumb/bin/pip install '.[aggregator]'

FROM python:3.11-slim-bookworm
# recipes/ is in the wheel (package data plumb/recipes): no PLUMB_RECIPES__DIR needed.
ENV PATH=/opt/plumb/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/plumb /opt/plumb
# A fixed non-root uid/gid that matches the chart's runAsUser/runAsGroup (65532).
RUN groupadd --system --gid 65532 plumb \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin plumb
USER 65532:65532
WORKDIR /tmp
EXPOSE 7443 8080
# The chart sets the command: ["plumb-agent"] or ["plumb", "serve"].
CMD ["plumb", "--help"]
