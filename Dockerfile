# Tollgate gateway image: `docker build -t tollgate .` then `docker run -p 8080:8080 tollgate`
# (the embedded default: SQLite, in-memory state, sandbox upstreams). See docs/operations.md.

# Both stages start from one exact base (tests/deploy/test_images.py refuses floating tags). To pin
# the bytes too, pass its digest: --build-arg PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:...
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# --- build: install Tollgate and its dependencies into a virtualenv (wheels: the slim image has no compiler) ---
FROM ${PYTHON_IMAGE} AS build
# Optional extras to bake in: `otel` for OpenTelemetry traces (`--build-arg TOLLGATE_EXTRAS=` for none).
ARG TOLLGATE_EXTRAS=otel
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/tollgate
WORKDIR /src
# Dependencies first, from the project metadata alone, so code changes reuse this layer.
# constraints.txt pins every version (`make lock`); `litellm` is an extra to list in TOLLGATE_EXTRAS.
COPY pyproject.toml README.md constraints.txt ./
RUN mkdir gateway providers local_backend pricing usage migrations sandbox \
    && /opt/tollgate/bin/pip install --prefer-binary -c constraints.txt ".${TOLLGATE_EXTRAS:+[$TOLLGATE_EXTRAS]}" \
    && /opt/tollgate/bin/pip uninstall --yes tollgate
COPY gateway ./gateway
COPY providers ./providers
COPY local_backend ./local_backend
COPY pricing ./pricing
COPY usage ./usage
COPY migrations ./migrations
COPY sandbox ./sandbox
RUN /opt/tollgate/bin/pip install --no-deps .

# --- run: the virtualenv on a clean slim image, as an unprivileged user ---
FROM ${PYTHON_IMAGE}
# The spool directory exists in the image so a fresh volume mounted there belongs to tollgate too.
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/tollgate tollgate \
    && install -d -o tollgate -g tollgate /var/lib/tollgate/spool
COPY --from=build /opt/tollgate /opt/tollgate
ENV PATH=/opt/tollgate/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /var/lib/tollgate
USER tollgate
EXPOSE 8080
# Liveness only (/healthz); orchestrators that route traffic should also watch /readyz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]
ENTRYPOINT ["tollgate"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
