# The gateway image the Helm chart refers to. Multi-stage: build wheels, install them into a clean runtime.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway gateway
COPY transforms transforms
COPY detectors detectors
COPY triton_models triton_models
# the examples ship in the wheel as gateway.examples (`lastmile examples` writes them out)
COPY examples examples
# the extra triton-local is tritonclient[grpc]: what the chart's default runtime (gateway.runtime: triton) needs;
# attach: the object stores' SDKs and the Schema Registry's serdes (gateway.objectStores, input:)
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[triton-local,attach]"

FROM python:3.11-slim
RUN groupadd --gid 10001 lastmile && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin lastmile
COPY --from=build /wheels /wheels
# the wheel ships the reference detectors (triton_models) and every data file; user detectors go to LASTMILE_REPO
RUN pip install --no-cache-dir --no-index --find-links /wheels "lastmile-gateway[triton-local,attach]" && rm -rf /wheels
ENV LASTMILE_REPO=/var/lib/lastmile/models \
    LASTMILE_CACHE=/tmp/lastmile \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 9308
ENTRYPOINT ["lastmile"]
CMD ["gateway", "run", "--config", "/etc/lastmile/gateway.yaml"]
