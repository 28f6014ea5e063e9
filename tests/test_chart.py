"""The Helm chart's behaviours that docs/deployment.md states, each checked on the rendered manifests (and the
image's Dockerfile): what is deployed, scraped, mounted, authenticated and named, and what fails the rendering."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path, PurePosixPath

import pytest
import yaml
from packaging.requirements import Requirement
from pydantic import ValidationError

from gateway.core import catalogue as mc
from gateway.core.config import GatewayConfig
from gateway.monitor.config import MonitorConfig
from tests.support.deploy import CHART, NAME, ROOT, _helm
from tests.support.tools import require_tool

VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
ALL_ON = yaml.safe_load((CHART / "ci" / "all-on-values.yaml").read_text())
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")  # DNS-1035: a Service's name
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")  # DNS-1123


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _rendered(values: dict, name: str = "lm") -> tuple[list[dict], str]:
    """The manifests and NOTES.txt of a release, as `helm template` renders them (values checked by the schema)."""
    helm = _helm()
    chart = helm.Chart.load(str(CHART))
    chart.validate_schema(values)
    out = chart.render(values, name=name, namespace="lastmile")
    notes = next((text for path, text in out.items() if path.endswith("NOTES.txt")), "")
    docs = [d for path, text in out.items() if not path.endswith("NOTES.txt") for d in yaml.safe_load_all(text) if d]
    return docs, notes


def _docs(values: dict, name: str = "lm") -> list[dict]:
    return _rendered(values, name)[0]


def _render_error(values: dict) -> str:
    helm = _helm()
    chart = helm.Chart.load(str(CHART))
    with pytest.raises(helm.HelmRenderError) as err:
        chart.render(values, name="lm", namespace="lastmile")
    return str(err.value)


def _kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def _component(doc: dict) -> str | None:
    return doc["metadata"].get("labels", {}).get("app.kubernetes.io/component")


def _deployment(docs: list[dict], component: str) -> dict:
    (dep,) = [
        d
        for d in _kind(docs, "Deployment")
        if d["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/component") == component
    ]
    return dep


def _config(docs: list[dict], key: str) -> dict:
    (cm,) = [d for d in _kind(docs, "ConfigMap") if key in d.get("data", {})]
    return yaml.safe_load(cm["data"][key])


def _contains(actual, expected) -> bool:
    """Whether every key and item given in ``expected`` is in ``actual`` with that value (defaults may add more)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _contains(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(map(_contains, actual, expected))
    return actual == expected


@pytest.fixture(autouse=True)
def _no_lastmile_env(monkeypatch):
    for name in [n for n in os.environ if n.startswith("LASTMILE_")]:
        monkeypatch.delenv(name)


# -- the image ------------------------------------------------------------------------------------------------
# what each runtime of the gateway imports beyond the base dependencies: detectors/runtimes/triton.py's
# require_client imports tritonclient.grpc (tritonclient's grpc extra); embedded runs onnxruntime
RUNTIME_NEEDS = {"triton": Requirement("tritonclient[grpc]"), "embedded": Requirement("onnxruntime")}


def _dockerfile_extras() -> tuple[set[str], set[str]]:
    """The extras the build stage builds wheels for, and those the runtime stage installs (offline, from them)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stages = re.split(r"^FROM ", text, flags=re.MULTILINE)[1:]
    assert len(stages) == 2, "a build stage and a runtime stage"
    (built,) = re.findall(r"pip wheel .*?\"?\.\[([\w,-]+)\]\"?", stages[0])
    (install,) = [line for line in stages[1].splitlines() if "pip install" in line]
    assert "--no-index" in install and "/wheels" in install  # only what the build stage built
    (installed,) = re.findall(r"lastmile-gateway\[([\w,-]+)\]", install)
    return set(built.split(",")), set(installed.split(","))


def test_the_image_has_what_every_runtime_of_the_chart_needs():
    built, installed = _dockerfile_extras()
    assert installed <= built
    assert "attach" in installed  # gateway.objectStores and input: (the stores' SDKs, the registry's serdes)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    for extra in installed:
        requirements += [Requirement(r) for r in project["optional-dependencies"][extra]]
    schema = json.loads((CHART / "values.schema.json").read_text())
    runtimes = schema["properties"]["gateway"]["properties"]["runtime"]["enum"]
    assert VALUES["gateway"]["runtime"] in runtimes and set(runtimes) == set(RUNTIME_NEEDS)
    for runtime in runtimes:
        need = RUNTIME_NEEDS[runtime]
        assert any(r.name == need.name and need.extras <= r.extras for r in requirements), (
            f"gateway.runtime: {runtime} needs {need}, which the image does not install"
        )


# -- Triton: deployed where the gateway uses it, scraped where deployed -------------------------------------------
def _triton_objects(docs: list[dict]) -> list[dict]:
    return [d for d in docs if _component(d) == "triton" or d["metadata"]["name"].endswith("-triton")]


@pytest.mark.parametrize(
    ("runtime", "enabled", "external"),
    [("triton", True, ""), ("embedded", True, ""), ("triton", False, "triton.gpu.svc:8001")],
)
def test_triton_is_deployed_only_where_the_gateway_uses_it(runtime, enabled, external):
    values = {"gateway": {"runtime": runtime}, "triton": {"enabled": enabled, "externalUrl": external}}
    docs, notes = _rendered(_merge(ALL_ON, values))
    cfg = GatewayConfig.model_validate(_config(docs, "gateway.yaml"))
    assert cfg.runtime == runtime
    deployed = runtime == "triton" and enabled
    objects = _triton_objects(docs)
    assert {d["kind"] for d in objects} == (
        {"Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor", "NetworkPolicy"} if deployed else set()
    )
    gpus = [
        c
        for d in _kind(docs, "Deployment")
        for c in d["spec"]["template"]["spec"]["containers"]
        if "nvidia.com/gpu" in str(c.get("resources"))
    ]
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for d in _kind(docs, "Deployment")
        for v in d["spec"]["template"]["spec"].get("volumes", [])
        if "persistentVolumeClaim" in v
    }
    assert bool(gpus) == deployed
    assert (VALUES["triton"]["modelRepository"]["persistentVolumeClaim"] in claims) == deployed
    if deployed:  # the gateway's Triton is the Service's gRPC port
        (service,) = [d for d in objects if d["kind"] == "Service"]
        grpc = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "grpc")
        assert cfg.triton_url == f"{service['metadata']['name']}:{grpc}" and cfg.triton_url in notes
    elif runtime == "triton":
        assert cfg.triton_url == external and external in notes
    else:
        assert "Triton" not in notes


def test_runtime_triton_without_a_triton_fails_the_rendering():
    message = _render_error({"triton": {"enabled": False}})
    assert "triton.externalUrl" in message and "gateway.runtime: embedded" in message
    assert "both set" in _render_error({"triton": {"externalUrl": "triton.gpu.svc:8001"}})
    _docs({"gateway": {"runtime": "embedded"}, "triton": {"enabled": False}})  # no Triton needed, none asked for


@pytest.mark.parametrize("runtime", ["triton", "embedded"])
def test_every_metrics_port_of_the_release_is_scraped(runtime):
    """Each Service with a metrics port (gateway, monitor, Triton where deployed) is selected by a ServiceMonitor
    scraping that port, and Triton's is the port its server exports metrics on."""
    docs = _docs(_merge(ALL_ON, {"gateway": {"runtime": runtime}}))
    monitors = _kind(docs, "ServiceMonitor")
    for service in _kind(docs, "Service"):
        labels = service["metadata"]["labels"]
        ports = {p["name"] for p in service["spec"]["ports"]}
        scraping = [m for m in monitors if m["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        assert [e["port"] for m in scraping for e in m["spec"]["endpoints"]] == (
            ["metrics"] if "metrics" in ports else []
        )
    components = {m["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] for m in monitors}
    assert ("triton" in components) == (runtime == "triton")
    if runtime == "triton":
        container = _deployment(docs, "triton")["spec"]["template"]["spec"]["containers"][0]
        port = next(p["containerPort"] for p in container["ports"] if p["name"] == "metrics")
        assert "--allow-metrics=true" in container["args"]
        assert port == int(
            next((a.split("=")[1] for a in container["args"] if a.startswith("--metrics-port=")), 8002)
        )  # tritonserver's default metrics port


# -- volumes ----------------------------------------------------------------------------------------------------
def test_file_roots_are_mounted_from_extra_volumes():
    docs = _docs(ALL_ON)
    pod = _deployment(docs, "gateway")["spec"]["template"]["spec"]
    mounts = pod["containers"][0]["volumeMounts"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    cfg = GatewayConfig.model_validate(_config(docs, "gateway.yaml"))
    assert cfg.sources.file_roots
    for root in cfg.sources.file_roots:
        (mount,) = [m for m in mounts if PurePosixPath(root).is_relative_to(m["mountPath"])]
        assert volumes[mount["name"]] in ALL_ON["gateway"]["extraVolumes"]


@pytest.mark.parametrize("part", ["gateway", "monitor", "canary"])
def test_extra_volumes_reach_each_pod(part):
    extra = {
        "extraVolumes": [{"name": "extra", "secret": {"secretName": "s"}}],
        "extraVolumeMounts": [{"name": "extra", "mountPath": "/etc/extra", "readOnly": True}],
    }
    docs = _docs(_merge(ALL_ON, {part: extra}))
    pod = _deployment(docs, part)["spec"]["template"]["spec"]
    assert extra["extraVolumes"][0] in pod["volumes"]
    assert extra["extraVolumeMounts"][0] in pod["containers"][0]["volumeMounts"]
    import kubernetes_validate as kv

    kv.validate(_deployment(docs, part), "1.30.0", strict=True)


@pytest.mark.parametrize("values", [{}, ALL_ON], ids=["default", "all-on"])
def test_every_pod_has_a_writable_tmp(values):
    """docs/deployment.md: /tmp is an emptyDir in every pod (every container's root filesystem is read-only)."""
    for dep in _kind(_docs(values), "Deployment"):
        pod = dep["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        for c in pod["containers"]:
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            (tmp,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert "emptyDir" in volumes[tmp["name"]] and not tmp.get("readOnly")


def test_every_pod_pulls_with_the_image_pull_secrets():
    deployments = _kind(_docs(ALL_ON), "Deployment")
    assert {_component(d) for d in deployments} == {"gateway", "monitor", "canary", "triton"}
    for dep in deployments:
        assert dep["spec"]["template"]["spec"]["imagePullSecrets"] == ALL_ON["imagePullSecrets"]


# -- the config files ---------------------------------------------------------------------------------------------
def test_config_overrides_reach_the_rendered_configs_and_validate():
    docs = _docs(ALL_ON)
    gateway = GatewayConfig.model_validate(_config(docs, "gateway.yaml"))
    monitor = MonitorConfig.model_validate(_config(docs, "monitor.yaml"))
    assert {"shadow", "onnxruntime"} <= ALL_ON["gateway"]["config"].keys() and ALL_ON["monitor"]["config"]
    assert _contains(gateway.model_dump(mode="json"), ALL_ON["gateway"]["config"])
    assert _contains(monitor.model_dump(mode="json"), ALL_ON["monitor"]["config"])
    # the chart's own settings are still there beside a key merged into the same section
    assert gateway.kafka.bootstrap == VALUES["kafka"]["bootstrap"] and gateway.http_port == VALUES["metrics"]["port"]
    assert monitor.checkpoint.directory is not None and monitor.http_port == VALUES["monitor"]["port"]
    # a misspelt field renders, and is refused where the pod loads the file (the models forbid unknown fields)
    misspelt = _config(_docs(_merge(ALL_ON, {"gateway": {"config": {"shadw": {"share": 0.1}}}})), "gateway.yaml")
    with pytest.raises(ValidationError, match="shadw"):
        GatewayConfig.model_validate(misspelt)


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"gateway": {"config": {"http_port": 1}}}, "gateway.config.http_port"),
        ({"gateway": {"config": {"limits": {"max_bytes": 1}}}}, "gateway.config.limits.max_bytes"),
        ({"monitor": {"config": {"checkpoint": {"directory": "/x"}}}}, "monitor.config.checkpoint.directory"),
        ({"monitor": {"config": {"kafka": {"bootstrap": "b:9092"}}}}, "monitor.config.kafka.bootstrap"),
    ],
)
def test_a_config_override_of_a_chart_setting_fails_the_rendering(values, key):
    assert key in _render_error(values)


# -- KEDA ----------------------------------------------------------------------------------------------------------
KEDA_SASL = {"PLAIN": "plaintext", "SCRAM-SHA-256": "scram_sha256", "SCRAM-SHA-512": "scram_sha512"}  # KEDA's names


@pytest.mark.parametrize(
    "kafka",
    [
        {"securityProtocol": "PLAINTEXT"},
        {"securityProtocol": "SSL"},
        {"securityProtocol": "SSL", "tls": {"caSecret": "kafka-ca"}},
        {"securityProtocol": "SASL_PLAINTEXT", "sasl": {"mechanism": "PLAIN", "existingSecret": "creds"}},
        {
            "securityProtocol": "SASL_SSL",
            "sasl": {"mechanism": "SCRAM-SHA-256", "existingSecret": "creds"},
            "tls": {"caSecret": "kafka-ca"},
        },
    ],
    ids=lambda k: k["securityProtocol"] + ("+ca" if "tls" in k else ""),
)
def test_keda_reads_the_lag_with_the_gateways_credentials(kafka):
    values = {"autoscaling": {"keda": {"enabled": True}}, "kafka": kafka}
    docs = _docs(values)
    (scaled,) = _kind(docs, "ScaledObject")
    (trigger,) = scaled["spec"]["triggers"]
    protocol = kafka["securityProtocol"]
    sasl, tls = protocol.startswith("SASL_"), protocol in ("SSL", "SASL_SSL")
    assert trigger["metadata"].get("sasl") == (KEDA_SASL[kafka["sasl"]["mechanism"]] if sasl else None)
    assert trigger["metadata"].get("tls") == ("enable" if tls else None)
    # what the gateway itself authenticates with: its SASL env from a Secret, its CA file from a Secret volume
    gateway = _deployment(docs, "gateway")["spec"]["template"]["spec"]
    env = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in gateway["containers"][0]["env"]}
    expected = {}
    if sasl:
        expected["username"] = env["LASTMILE_KAFKA__SASL_USERNAME"]
        expected["password"] = env["LASTMILE_KAFKA__SASL_PASSWORD"]
    cafile = GatewayConfig.model_validate(_config(docs, "gateway.yaml")).kafka.ssl_cafile
    if tls and cafile:
        (mount,) = [m for m in gateway["containers"][0]["volumeMounts"] if m["mountPath"] == str(Path(cafile).parent)]
        (volume,) = [v for v in gateway["volumes"] if v["name"] == mount["name"]]
        expected["ca"] = {"name": volume["secret"]["secretName"], "key": Path(cafile).name}
    auths = _kind(docs, "TriggerAuthentication")
    if not expected:
        assert not auths and "authenticationRef" not in trigger
        return
    (auth,) = auths
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    refs = {r["parameter"]: {"name": r["name"], "key": r["key"]} for r in auth["spec"]["secretTargetRef"]}
    assert refs == expected


def test_keda_behind_sasl_without_credentials_fails_the_rendering():
    values = {"autoscaling": {"keda": {"enabled": True}}, "kafka": {"securityProtocol": "SASL_SSL"}}
    assert "kafka.sasl.existingSecret" in _render_error(values)


# -- names ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("release", "values"),
    [("r" * 53, {}), ("lm", {"fullnameOverride": "f" * 63}), ("lm", {"nameOverride": "n" * 63})],
    ids=["longest-release", "longest-fullname", "longest-name"],
)
def test_every_name_fits_and_every_reference_resolves(release, values):
    docs = _docs(_merge(ALL_ON, values), name=release)
    names = {}
    for d in docs:
        name = d["metadata"]["name"]
        assert len(name) <= 63 and DNS_SUBDOMAIN.match(name), name
        assert (d["kind"], name) not in names
        names[(d["kind"], name)] = d
    for service in _kind(docs, "Service"):
        assert DNS_LABEL.match(service["metadata"]["name"])
    for dep in _kind(docs, "Deployment"):
        for v in dep["spec"]["template"]["spec"]["volumes"]:
            if "configMap" in v:
                assert ("ConfigMap", v["configMap"]["name"]) in names
    (scaled,) = _kind(docs, "ScaledObject")
    assert ("Deployment", scaled["spec"]["scaleTargetRef"]["name"]) in names
    assert ("TriggerAuthentication", scaled["spec"]["triggers"][0]["authenticationRef"]["name"]) in names
    host = GatewayConfig.model_validate(_config(docs, "gateway.yaml")).triton_url.rsplit(":", 1)[0]
    assert ("Service", host) in names


def test_kafka_topic_objects_have_valid_names_and_the_topics_own():
    kafka = {
        "inputTopic": "Lastmile_Videos.v2",
        "outputTopic": "scores__EU",
        "labelsTopic": "lastmile.labels",
        "topics": {"create": True},
    }
    topics = _kind(_docs({"kafka": kafka}), "KafkaTopic")
    wanted = {kafka["inputTopic"], kafka["outputTopic"], kafka["labelsTopic"], kafka["inputTopic"] + ".dlq"}
    assert {t["spec"]["topicName"] for t in topics} == wanted
    names = [t["metadata"]["name"] for t in topics]
    assert {t["spec"]["topicName"]: t["metadata"]["name"] for t in topics}[kafka["inputTopic"]] == (
        "lastmile-videos-v2"  # docs/deployment.md's example
    )
    assert len(set(names)) == len(names) and all(len(n) <= 253 and DNS_SUBDOMAIN.match(n) for n in names)
    collide = {"kafka": {"inputTopic": "a_b", "outputTopic": "a.b", "topics": {"create": True}}}
    assert "a_b" in _render_error(collide) and "a.b" in _render_error(collide)


# -- disruptions and shutdown -----------------------------------------------------------------------------------
def _allowed_disruptions(pdb: dict, replicas: int) -> int:
    def count(value, round_up: bool) -> int:
        if isinstance(value, str) and value.endswith("%"):
            share = int(value[:-1]) * replicas / 100
            return math.ceil(share) if round_up else math.floor(share)
        return int(value)

    spec = pdb["spec"]
    if "maxUnavailable" in spec:
        return count(spec["maxUnavailable"], True)
    return replicas - count(spec["minAvailable"], True)


@pytest.mark.parametrize(
    "values",
    [{}, {"gateway": {"replicas": 1}}, {"autoscaling": {"keda": {"enabled": True, "minReplicas": 1}}}],
    ids=["default", "one-replica", "keda-at-one"],
)
def test_a_drain_can_evict_a_gateway_at_its_fewest_replicas(values):
    merged = _merge(VALUES, values)
    keda = merged["autoscaling"]["keda"]
    fewest = max(keda["minReplicas"], 1) if keda["enabled"] else merged["gateway"]["replicas"]
    (pdb,) = [p for p in _kind(_docs(values), "PodDisruptionBudget") if _component(p) == "gateway"]
    assert _allowed_disruptions(pdb, fewest) >= 1


def test_the_gateway_pdb_takes_min_available_instead():
    docs = _docs({"gateway": {"replicas": 3, "podDisruptionBudget": {"minAvailable": 2}}})
    (pdb,) = [p for p in _kind(docs, "PodDisruptionBudget") if _component(p) == "gateway"]
    assert pdb["spec"]["minAvailable"] == 2 and "maxUnavailable" not in pdb["spec"]
    assert _allowed_disruptions(pdb, 3) == 1


@pytest.mark.parametrize("timeout", [60, 300, 12.5])
def test_the_grace_period_covers_the_shutdown_timeout(timeout):
    docs = _docs({"gateway": {"shutdownTimeoutS": timeout}})
    cfg = GatewayConfig.model_validate(_config(docs, "gateway.yaml"))
    grace = _deployment(docs, "gateway")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert cfg.shutdown_timeout_s == timeout
    assert grace == math.ceil(timeout) + VALUES["gateway"]["terminationGraceMarginS"] and grace > timeout


# -- the PrometheusRule ---------------------------------------------------------------------------------------------
MONITOR_EXPORTERS = {mc.Exporter.MONITOR, mc.Exporter.WINDOWS, mc.Exporter.COMPARISONS}
MONITOR_ONLY = {s for f in mc.keyed().values() if set(f.exporters) <= MONITOR_EXPORTERS for s in f.series}


def _shipped_rules() -> list[dict]:
    return [
        r for g in yaml.safe_load((CHART / "files" / "lastmile-rules.yaml").read_text())["groups"] for r in g["rules"]
    ]


def _rule_name(rule: dict) -> str:
    return rule.get("record") or rule["alert"]


def _monitor_rules(rules: list[dict]) -> set[str]:
    """Rules that read a series only the monitor exports, directly or through recording rules."""
    monitor, recorded = set(), set()
    while True:
        more = {_rule_name(r) for r in rules if set(NAME.findall(r["expr"])) & (MONITOR_ONLY | recorded)} - monitor
        if not more:
            return monitor
        monitor |= more
        recorded |= {n for n in more if ":" in n}


def _rendered_rules(values: dict) -> list[dict]:
    (rule,) = _kind(_docs(values), "PrometheusRule")
    return [r for g in rule["spec"]["groups"] for r in g["rules"]]


def test_without_a_monitor_no_rule_reads_the_monitors_series(tmp_path):
    values = {"monitor": {"enabled": False}, "metrics": {"prometheusRule": {"enabled": True}}}
    shipped = _shipped_rules()
    dropped = _monitor_rules(shipped)
    assert {"LastmileMonitorNotReady", "LastmileAucDrift", "LastmileChallengerLessRobust"} <= dropped
    rendered = _rendered_rules(values)
    assert rendered == [r for r in shipped if _rule_name(r) not in dropped]
    assert not _monitor_rules(rendered)
    assert _rendered_rules({"metrics": {"prometheusRule": {"enabled": True}}}) == shipped  # a monitor: every rule
    promtool = require_tool("promtool")
    (rule,) = _kind(_docs(values), "PrometheusRule")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    res = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_runbook_urls_are_made_absolute_under_runbook_base_url():
    base = ALL_ON["metrics"]["prometheusRule"]["runbookBaseUrl"]
    shipped = {r["alert"]: r["annotations"]["runbook_url"] for r in _shipped_rules() if "alert" in r}
    rendered = {r["alert"]: r["annotations"]["runbook_url"] for r in _rendered_rules(ALL_ON) if "alert" in r}
    assert rendered.keys() == shipped.keys()
    for alert, url in rendered.items():
        assert url == base.rstrip("/") + "/" + shipped[alert] and re.match(r"^https?://", url)


# -- the docs' commands and references ---------------------------------------------------------------------------
def _commands(doc: Path) -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", doc.read_text(), flags=re.DOTALL)
    return [shlex.split(line.split(" > ")[0]) for b in blocks for line in b.replace("\\\n", " ").splitlines() if line]


def test_the_deployment_docs_build_the_image_the_chart_installs():
    commands = _commands(ROOT / "docs" / "deployment.md")
    (build,) = [c for c in commands if c[:2] == ["docker", "build"]]
    assert build[-1] == "." and (ROOT / "Dockerfile").is_file()  # the checkout's root is the context
    image = build[build.index("-t") + 1]
    helm_commands = [c for c in commands if c[0] == "helm" and c[1] in ("install", "template")]
    assert {c[1] for c in helm_commands} == {"install", "template"}
    helm = _helm()
    chart = helm.Chart.load(str(CHART))
    for cmd in helm_commands:
        assert (ROOT / cmd[3] / "Chart.yaml").is_file()
        values: dict = {}
        for i, arg in enumerate(cmd):
            if arg == "--set":
                values = _merge(values, helm.parse_set_string(cmd[i + 1]))
        assert f"{values['image']['repository']}:{values['image']['tag']}" == image
        assert values["image"]["tag"] == chart.metadata["appVersion"]
        docs = _docs(values, name=cmd[2])
        images = {
            c["image"]
            for d in _kind(docs, "Deployment")
            if _component(d) != "triton"
            for c in d["spec"]["template"]["spec"]["containers"]
        }
        assert images == {image}


def test_the_chart_lints_with_every_part_on():
    report = _helm().lint(str(CHART), ALL_ON, strict=True)
    assert not report["errors"] and all(m["severity"] < 3 for m in report["messages"])


def test_the_image_tag_defaults_to_the_app_version():
    chart = _helm().Chart.load(str(CHART))
    docs = _docs({"image": {"repository": "registry.example.com/lastmile"}})
    assert _deployment(docs, "gateway")["spec"]["template"]["spec"]["containers"][0]["image"] == (
        f"registry.example.com/lastmile:{chart.metadata['appVersion']}"
    )


def test_the_files_the_docs_and_values_name_exist():
    texts = {p: p.read_text() for p in [ROOT / "README.md", CHART / "values.yaml", *(ROOT / "docs").glob("*.md")]}
    for path, text in texts.items():
        for manifest in re.findall(r"--manifest (\S+\.jsonl)", text):
            assert (ROOT / manifest).is_file(), f"{path.name}: {manifest}"
    for doc in re.findall(r"\(?((?:docs/)?[\w-]+\.md)\b", texts[CHART / "values.yaml"]):
        assert (ROOT / doc).is_file() or (ROOT / "docs" / doc).is_file(), f"values.yaml cites {doc}"


# -- pods in a locked-down cluster (issue 53) ---------------------------------------------------------------------
def _pods(docs: list[dict]) -> list[tuple[dict, dict]]:
    """(workload, pod spec) of every workload that runs pods."""
    out = []
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            out.append((d, d["spec"]["template"]["spec"]))
        elif d["kind"] == "CronJob":
            out.append((d, d["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
    return out


@pytest.mark.parametrize("values", [{}, ALL_ON], ids=["default", "all-on"])
def test_every_pod_runs_as_a_locked_down_cluster_asks(values):
    """Non-root, read-only root filesystem (a writable emptyDir at /tmp: the test above), every capability dropped,
    no privilege escalation, the runtime's seccomp profile, no service account token; valid objects."""
    import kubernetes_validate as kv

    pods = _pods(_docs(values))
    assert pods
    for workload, pod in pods:
        name = workload["metadata"]["name"]
        context = pod["securityContext"]
        assert context["runAsNonRoot"] is True and context["runAsUser"] > 0 and context["runAsGroup"] > 0, name
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert pod["automountServiceAccountToken"] is False, name
        for c in pod["containers"] + pod.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert sc["capabilities"] == {"drop": ["ALL"]}, (name, c["name"])  # nothing added back
            assert not sc.get("privileged") and sc.get("runAsUser", context["runAsUser"]) != 0, (name, c["name"])
        kv.validate(workload, "1.30.0", strict=True)


def test_network_policies_let_each_pod_reach_only_what_it_needs():
    import kubernetes_validate as kv

    assert _kind(_docs({}), "NetworkPolicy")  # on by default (what the default allows: the next test)
    assert not _kind(_docs({"networkPolicy": {"enabled": False}}), "NetworkPolicy")  # off where asked
    docs = _docs(ALL_ON)
    policies = _kind(docs, "NetworkPolicy")
    np = ALL_ON["networkPolicy"]
    by_component = {p["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"]: p for p in policies}
    for workload, _pod in _pods(docs):  # every pod is selected by its component's policy
        labels = workload["spec"]["template"]["metadata"]["labels"]
        policy = by_component[labels["app.kubernetes.io/component"]]
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    for policy in policies:
        kv.validate(policy, "1.30.0", strict=True)

    dns = {"to": np["dns"]["to"], "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
    kafka = {"to": np["kafka"]["to"], "ports": [{"port": p, "protocol": "TCP"} for p in np["kafka"]["ports"]]}
    gateway = by_component["gateway"]["spec"]
    triton_peer = gateway["egress"][2]["to"][0]["podSelector"]["matchLabels"]
    # DNS, Kafka, Triton, then the scorers', stores', source hosts' and identity's networks, then the free-form rules
    listed = [_egress_rule(e, DEFAULT_PORTS[name]) for name in DEFAULT_PORTS for e in np[name]]
    assert all(np[name] for name in DEFAULT_PORTS)  # every list has entries (every part on)
    assert gateway["egress"] == [dns, kafka, gateway["egress"][2], *listed, *np["egress"]]
    assert triton_peer["app.kubernetes.io/component"] == "triton" and gateway["egress"][2]["ports"] == [
        {"port": 8001, "protocol": "TCP"}
    ]
    assert gateway["ingress"] == [{"from": np["metricsFrom"], "ports": [{"port": 9308, "protocol": "TCP"}]}]
    triton = by_component["triton"]["spec"]
    assert triton["egress"] == []  # Triton reaches nothing
    assert triton["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "gateway"
    assert by_component["monitor"]["spec"]["egress"] == [dns, kafka]
    prometheus = {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
                  "ports": [{"port": 9090, "protocol": "TCP"}]}  # fmt: skip
    asked = _merge(ALL_ON, {"networkPolicy": {"monitorEgress": [prometheus]},
                            "monitor": {"config": {"alerts_from": "http://prometheus.monitoring:9090"}}})  # fmt: skip
    with_alerts = {p["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"]: p
                   for p in _kind(_docs(asked), "NetworkPolicy")}  # fmt: skip
    assert with_alerts["monitor"]["spec"]["egress"] == [dns, kafka, prometheus]  # the live page's alerts
    assert with_alerts["gateway"]["spec"]["egress"] == gateway["egress"]
    assert by_component["canary"]["spec"] == {**by_component["canary"]["spec"], "ingress": [], "egress": [dns, kafka]}


# -- network policies on by default: each destination's rule from the values -------------------------------------
DEFAULT_PORTS = {"scorers": [], "stores": [443], "hosts": [80, 443], "identity": [443]}  # values.yaml's comments


def _egress_rule(entry: dict, ports: list[int]) -> dict:
    """The rule docs/deployment.md says an entry of networkPolicy.scorers, .stores, .hosts or .identity makes."""
    cut = {"except": entry["except"]} if "except" in entry else {}
    peers = [{"ipBlock": {"cidr": c, **cut}} for c in entry.get("cidrs", [])] + entry.get("to", [])
    return {"to": peers, "ports": [{"port": p, "protocol": "TCP"} for p in entry.get("ports", ports)]}


def _policies(docs: list[dict]) -> dict[str, dict]:
    return {p["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"]: p["spec"]
            for p in _kind(docs, "NetworkPolicy")}  # fmt: skip


def test_the_default_network_policy_lets_the_gateway_reach_only_dns_kafka_and_triton():
    """On by default, every pod selected; the default opens no source (no store, host or identity network) and
    leaves DNS and Kafka to any peer on their ports, since the chart cannot know where they are."""
    import kubernetes_validate as kv

    docs = _docs({})
    policies = _policies(docs)
    assert set(policies) == {_component(w) for w, _ in _pods(docs)} == {"gateway", "monitor", "triton"}
    for policy in _kind(docs, "NetworkPolicy"):
        kv.validate(policy, "1.30.0", strict=True)
    dns = {"to": [], "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
    kafka = {"to": [], "ports": [{"port": 9092, "protocol": "TCP"}]}
    (triton,) = [r for r in policies["gateway"]["egress"] if r not in (dns, kafka)]
    assert policies["gateway"]["egress"] == [dns, kafka, triton]
    assert triton["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "triton"
    assert policies["triton"]["egress"] == [] and policies["monitor"]["egress"] == [dns, kafka]
    embedded = _policies(_docs({"gateway": {"runtime": "embedded"}}))
    assert embedded["gateway"]["egress"] == [dns, kafka] and "triton" not in embedded  # no Triton, no rule to it


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("stores", {"cidrs": ["198.51.100.0/24", "2001:db8::/32"]}),  # default port 443
        (
            "stores",
            {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "minio"}}}], "ports": [9000]},
        ),
        ("hosts", {"cidrs": ["0.0.0.0/0"], "except": ["10.0.0.0/8", "169.254.0.0/16"]}),  # default ports 80, 443
        ("hosts", {"cidrs": ["203.0.113.7/32"], "ports": [8080]}),
        ("scorers", {"cidrs": ["10.30.0.0/24"], "ports": [8001]}),
        ("identity", {"cidrs": ["169.254.169.254/32"], "ports": [80]}),  # GKE's metadata server
        ("identity", {"cidrs": ["192.0.2.16/28"]}),  # an STS VPC endpoint, default port 443
    ],
)
def test_egress_rules_render_from_each_list_of_networks(name, entry):
    import kubernetes_validate as kv

    docs = _docs({"networkPolicy": {name: [entry]}})
    (gateway,) = [p for p in _kind(docs, "NetworkPolicy") if p["metadata"]["name"].endswith("-gateway")]
    kv.validate(gateway, "1.30.0", strict=True)
    assert gateway["spec"]["egress"][-1] == _egress_rule(entry, DEFAULT_PORTS[name])
    assert len(gateway["spec"]["egress"]) == len(_policies(_docs({}))["gateway"]["egress"]) + 1
    for component, policy in _policies(docs).items():  # the gateway's alone: only it reads sources and scores
        assert component == "gateway" or _egress_rule(entry, DEFAULT_PORTS[name]) not in policy["egress"]


def test_kafka_brokers_outside_the_cluster_are_given_as_cidrs():
    values = {"networkPolicy": {"kafka": {"to": [{"podSelector": {"matchLabels": {"app": "kafka"}}}],
                                          "cidrs": ["10.20.0.0/24"], "ports": [9094]}}}  # fmt: skip
    expected = {"to": [{"podSelector": {"matchLabels": {"app": "kafka"}}}, {"ipBlock": {"cidr": "10.20.0.0/24"}}],
                "ports": [{"port": 9094, "protocol": "TCP"}]}  # fmt: skip
    for component, policy in _policies(_docs(values)).items():
        assert (expected in policy["egress"]) == (component != "triton"), component


@pytest.mark.parametrize(
    ("network_policy", "refused"),
    [
        ({"stores": [{"ports": [443]}]}, "missing property"),  # no peer: `to: []` would allow every destination
        ({"hosts": [{"cidrs": []}]}, "minItems"),
        ({"scorers": [{"cidrs": ["10.30.0.0/24"]}]}, "ports"),  # a scorer's port has no default
        ({"stores": [{"cidrs": ["s3.amazonaws.com"]}]}, "pattern"),  # a NetworkPolicy takes networks, not names
        ({"identity": [{"to": [{"podSelector": {}}], "except": ["10.0.0.0/8"]}]}, "cidrs"),
        ({"stores": [{"cidrs": ["10.0.0.0/8"], "port": 443}]}, "port"),
    ],
    ids=["no-peer", "empty-cidrs", "scorer-without-ports", "a-name", "except-without-cidrs", "misspelt"],
)
def test_an_egress_entry_that_would_open_too_much_or_mean_nothing_is_refused(network_policy, refused):
    helm = _helm()
    with pytest.raises(helm.HelmValuesError, match=refused):
        helm.Chart.load(str(CHART)).validate_schema({"networkPolicy": network_policy})


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"gateway": {"objectStores": ["s3://uploads/videos/"]}}, "networkPolicy.stores"),
        ({"gateway": {"httpAllowHosts": ["media.example"]}}, "networkPolicy.hosts"),
        ({"triton": {"enabled": False, "externalUrl": "triton.gpu.svc:8001"}}, "networkPolicy.scorers"),
        (
            {"serviceAccount": {"annotations": {"iam.gke.io/gcp-service-account": "a@p.iam.gserviceaccount.com"}}},
            "networkPolicy.identity",
        ),
    ],
)
def test_the_notes_name_a_destination_the_policy_does_not_open(values, named):
    assert named in _rendered(values)[1]
    assert named not in _rendered({})[1]
    assert named not in _rendered(_merge(values, {"networkPolicy": {"enabled": False}}))[1]
    opened = _merge(values, {"networkPolicy": {named.split(".")[1]: [{"cidrs": ["198.51.100.0/24"], "ports": [1]}]}})
    assert named not in _rendered(opened)[1]


# -- workload identity -------------------------------------------------------------------------------------------
IDENTITIES = {
    "irsa": {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/lastmile-reader"},
    "gke": {"iam.gke.io/gcp-service-account": "lastmile@project.iam.gserviceaccount.com"},
    "azure": {"azure.workload.identity/client-id": "00000000-0000-0000-0000-000000000000"},
}
# what each webhook adds to a pod it mutates (amazon-eks-pod-identity-webhook, azure-workload-identity: its current
# volume name and path; older releases mount /var/run/secrets/azure/tokens): a projected token of its own audience,
# whatever the pod's automountServiceAccountToken. GKE's metadata server adds nothing to the pod
WEBHOOK_TOKENS = {
    "irsa": ("aws-iam-token", "sts.amazonaws.com", "/var/run/secrets/eks.amazonaws.com/serviceaccount"),
    "azure": (
        "azure-workload-identity-reserved-" + "0" * 30,
        "api://AzureADTokenExchange",
        "/var/run/secrets/azure/wi",
    ),
}


@pytest.mark.parametrize("identity", IDENTITIES)
def test_workload_identity_reaches_the_gateway(identity):
    """The service account carries the identity's annotation; the pods keep the Kubernetes API's token out and run
    with an fsGroup (the non-root user reads a projected token); the webhook's own token volume fits each pod as
    it would add it (no name or path of the chart's in its way, the pod still valid)."""
    import kubernetes_validate as kv

    values = copy.deepcopy(ALL_ON)  # every part on, with this identity alone
    values["serviceAccount"] = {"annotations": IDENTITIES[identity]}
    values["gateway"]["podLabels"] = {"azure.workload.identity/use": "true"} if identity == "azure" else {}
    # (Azure's webhook mutates only the pods labelled so: the gateway's, which read the stores)
    docs = _docs(values)
    (account,) = _kind(docs, "ServiceAccount")
    assert (
        account["metadata"]["annotations"] == IDENTITIES[identity] and account["automountServiceAccountToken"] is False
    )
    for workload, pod in _pods(docs):
        assert pod["serviceAccountName"] == account["metadata"]["name"] and pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert ("azure.workload.identity/use" in labels) == (identity == "azure" and _component(workload) == "gateway")
        if identity not in WEBHOOK_TOKENS:
            continue
        volume, audience, path = WEBHOOK_TOKENS[identity]
        assert volume not in {v["name"] for v in pod["volumes"]}
        mutated = copy.deepcopy(workload)
        spec = mutated["spec"]["template"]["spec"]
        token = {"serviceAccountToken": {"audience": audience, "expirationSeconds": 86400, "path": "token"}}
        spec["volumes"].append({"name": volume, "projected": {"sources": [token]}})
        for c in spec["containers"]:
            mounts = [PurePosixPath(m["mountPath"]) for m in c["volumeMounts"]]  # none at, over or under the token's
            assert not [m for m in mounts if m.is_relative_to(path) or PurePosixPath(path).is_relative_to(m)], c["name"]
            c["volumeMounts"].append({"name": volume, "mountPath": path, "readOnly": True})
        kv.validate(mutated, "1.30.0", strict=True)


def test_service_account_annotations_and_pod_labels_render_where_asked():
    docs = _docs(ALL_ON)
    (account,) = _kind(docs, "ServiceAccount")
    assert account["metadata"]["annotations"] == ALL_ON["serviceAccount"]["annotations"]
    assert "annotations" not in _kind(_docs({}), "ServiceAccount")[0]["metadata"]
    assert not _kind(_docs({"serviceAccount": {"create": False, "name": "existing"}}), "ServiceAccount")
    for workload, _pod in _pods(docs):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        own = ALL_ON["gateway"]["podLabels"] if _component(workload) == "gateway" else {}
        selector = workload["spec"]["selector"]["matchLabels"]
        assert labels == {**selector, **ALL_ON["podLabels"], **own}, workload["metadata"]["name"]
    helm = _helm()
    for values in ({"podLabels": {"app.kubernetes.io/component": "x"}}, {"gateway": {"podLabels": {"n": 1}}}):
        with pytest.raises(helm.HelmValuesError):  # a selector label would unselect the pods; values are strings
            helm.Chart.load(str(CHART)).validate_schema(values)


def test_an_identity_token_of_the_asked_audience_reaches_the_gateway_alone():
    """gateway.identityToken: for a provider no webhook serves (S3 from GKE), a token of that audience only."""
    import kubernetes_validate as kv

    docs = _docs(ALL_ON)
    asked = ALL_ON["gateway"]["identityToken"]
    for workload, pod in _pods(docs):
        projected = [v for v in pod["volumes"] if "projected" in v]
        if _component(workload) != "gateway":
            assert not projected
            continue
        (volume,) = projected
        assert volume["projected"]["sources"] == [{"serviceAccountToken": {**asked, "path": "token"}}]
        (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
        assert mount == {"name": volume["name"], "mountPath": "/var/run/secrets/lastmile/identity", "readOnly": True}
        kv.validate(workload, "1.30.0", strict=True)
    assert not [v for _w, pod in _pods(_docs({})) for v in pod["volumes"] if "projected" in v]


def test_object_stores_reach_the_gateway_config():
    cfg = GatewayConfig.model_validate(_config(_docs(ALL_ON), "gateway.yaml"))
    # (a prefix naming only its bucket, az://media, is compared as az://media/: docs/sources.md)
    assert [p.rstrip("/") for p in cfg.sources.object_stores] == [
        p.rstrip("/") for p in ALL_ON["gateway"]["objectStores"]
    ]
    assert "object_stores" not in _config(_docs({}), "gateway.yaml")["sources"]  # none: no object is read
    # an S3-compatible endpoint through gateway.config, merged beside the chart's sources (docs/deployment.md)
    minio = {
        "gateway": {"objectStores": ["s3://videos/"], "config": {"sources": {"s3_endpoint_url": "http://minio:9000"}}}
    }
    cfg = GatewayConfig.model_validate(_config(_docs(minio), "gateway.yaml"))
    assert cfg.sources.s3_endpoint_url == "http://minio:9000" and cfg.sources.object_stores == ["s3://videos/"]


# -- images pinned by digest -------------------------------------------------------------------------------------
DIGEST = "sha256:" + "ab" * 32


def _images(docs: list[dict]) -> dict[str, set[str]]:
    return {_component(w): {c["image"] for c in pod["containers"]} for w, pod in _pods(docs)}


def test_images_are_pinned_by_digest_where_one_is_given():
    values = {"image": {"repository": "registry.example.com/lastmile", "tag": "9.9.9", "digest": DIGEST},
              "triton": {"image": {"digest": "sha256:" + "cd" * 32}}, "canary": {"enabled": True}}  # fmt: skip
    images = _images(_docs(values))
    triton = VALUES["triton"]["image"]["repository"]
    assert images == {"gateway": {f"registry.example.com/lastmile@{DIGEST}"},  # the tag ignored
                      "monitor": {f"registry.example.com/lastmile@{DIGEST}"},
                      "canary": {f"registry.example.com/lastmile@{DIGEST}"},
                      "triton": {f"{triton}@sha256:{'cd' * 32}"}}  # fmt: skip
    chart = _helm().Chart.load(str(CHART))
    tags = _images(_docs({}))  # no digest: the tags, as before
    assert tags["gateway"] == {f"{VALUES['image']['repository']}:{chart.metadata['appVersion']}"}
    assert tags["triton"] == {f"{triton}:{VALUES['triton']['image']['tag']}"}


@pytest.mark.parametrize(
    "image",
    [
        {"digest": "sha256:abc"},
        {"digest": "sha256:" + "AB" * 32},  # digests are lower-case hex
        {"digest": "latest"},
        {"digest": "ab" * 32},  # the algorithm is part of it
        {"repository": f"ghcr.io/lastmile/lastmile-gateway@{DIGEST}"},  # the digest goes in image.digest
    ],
)
def test_a_digest_of_the_wrong_form_is_refused(image):
    helm = _helm()
    chart = helm.Chart.load(str(CHART))
    for values in ({"image": image}, {"triton": {"image": image}}):
        with pytest.raises(helm.HelmValuesError):
            chart.validate_schema(values)


def test_every_object_names_the_release_namespace():
    """An explicit namespace (not the `default` a kubectl apply without -n would use)."""
    for values in ({}, ALL_ON):
        for doc in _docs(values):
            assert doc["metadata"]["namespace"] == "lastmile", (doc["kind"], doc["metadata"]["name"])
