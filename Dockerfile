# The gateway image the Helm chart refers to. Multi-stage: build a wheel, install it into a clean runtime.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway gateway
COPY transforms transforms
COPY detectors detectors
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN groupadd --gid 10001 lastmile && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin lastmile
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
# the reference detectors (the chart's default model repository for the embedded runtime)
COPY --chown=10001:10001 triton_models /opt/lastmile/triton_models
ENV LASTMILE_REPO=/opt/lastmile/triton_models \
    LASTMILE_CACHE=/tmp/lastmile \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 9308
ENTRYPOINT ["lastmile"]
CMD ["gateway", "run", "--config", "/etc/lastmile/gateway.yaml"]
