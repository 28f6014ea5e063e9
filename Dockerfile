# The gateway image the Helm chart refers to. Multi-stage: build a wheel, install it into a clean runtime.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway gateway
COPY transforms transforms
COPY detectors detectors
COPY triton_models triton_models
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN groupadd --gid 10001 lastmile && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin lastmile
COPY --from=build /wheels /wheels
# the wheel ships the reference detectors (triton_models) and every data file; user detectors go to LASTMILE_REPO
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
ENV LASTMILE_REPO=/var/lib/lastmile/models \
    LASTMILE_CACHE=/tmp/lastmile \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 9308
ENTRYPOINT ["lastmile"]
CMD ["gateway", "run", "--config", "/etc/lastmile/gateway.yaml"]
