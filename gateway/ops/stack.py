"""``lastmile up``: the local stack in one process tree: the broker, one gateway, the monitor and (with
``--prometheus``) the real Prometheus server with the project's rules, each in its own process group.

It writes the configs it used into its folder (``gateway.yaml`` and ``monitor.yaml``, which ``lastmile send``
and ``lastmile scores`` read from there, and ``prometheus.yml``), logs each component to ``<name>.log``, records
what it started in ``stack.json``, and :meth:`Stack.stop` stops every process group it started.
"""

from __future__ import annotations

import json
import shlex
import shutil
import socket
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from detectors.serving.processes import die_with_parent, free_port, stop_group
from gateway import bus
from gateway.core.contenders import Contender, split_pair
from gateway.core.kafka_settings import KafkaSettings
from gateway.core.settings_file import commented_yaml
from gateway.monitor.config import POPULATIONS, MonitorConfig, MonitorKafka
from gateway.ops.rules import RULES, local
from gateway.toolkit import tansu
from transforms.support.config_errors import ConfigError

if TYPE_CHECKING:
    from gateway.core.config import GatewayConfig

HEADER = """Written by `lastmile up`: the configuration its {what} ran with. Start from it:
`lastmile {command} --config {name}`. Every field is documented in examples/{name}."""


class StackError(RuntimeError):
    """The local stack cannot start as asked (a port taken, Prometheus missing, a component that exited)."""


@dataclass
class StackOptions:
    folder: Path
    detectors: str = "all"
    conditions: str = "all"
    profile: str = "throughput"
    workers: int = 2
    roots: list[Path] = field(default_factory=lambda: [Path.cwd()])
    kafka_port: int = 9092
    gateway_port: int = 9308
    monitor_port: int = 9309
    prometheus: bool = False
    prometheus_port: int = 9090
    compare: list[str] = field(default_factory=list)  # CHAMPION:CHALLENGER, each on traffic and on canaries
    shadow: list[str] = field(default_factory=list)  # detectors scored on a share of videos only
    share: float = 1.0


def _port(port: int) -> int:
    """``port``, or a free one for 0; a taken port is a clear error, not a crash later."""
    if port == 0:
        return free_port()
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind: TIME-WAIT is no owner
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise StackError(f"port {port} is taken ({exc.strerror}); pass another, or 0 for any free port") from exc
    return port


class Stack:
    def __init__(self, opts: StackOptions) -> None:
        self.opts = opts
        self.folder = opts.folder.resolve()
        self.processes: dict[str, subprocess.Popen] = {}
        self.addresses: dict[str, str] = {}
        self._commands: dict[str, list[str]] = {}  # how each part but the broker was started: to start it again

    # -- start -----------------------------------------------------------------------------------------------
    def start(self) -> None:
        o = self.opts
        prometheus = shutil.which("prometheus") if o.prometheus else None
        if o.prometheus and not prometheus:
            raise StackError(
                "--prometheus needs the prometheus server binary on PATH (Debian: apt-get install prometheus)"
            )
        tansu.tansu_binary()  # first: without the `local` extra (or a port taken), say so and leave no folder behind
        self._check_contenders()
        ports = {k: _port(getattr(o, f"{k}_port")) for k in ("kafka", "gateway", "monitor")}
        if prometheus:  # known before the monitor's config is written: its page lists this server's alerts
            ports["prometheus"] = _port(o.prometheus_port)
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            broker = tansu.start_broker(ports["kafka"], log=self.folder / "broker.log", die_with_parent=True)
            self.processes["broker"] = broker.process
            self.addresses["bootstrap"] = broker.bootstrap
            gateway, monitor = self._configs(broker.bootstrap, ports)
            bus.ensure_topics(gateway.kafka, partitions=2, extra=(monitor.kafka.labels_topic,))
            self._spawn("gateway", ["gateway", "run", "--config", str(self.folder / "gateway.yaml")])
            self._spawn("monitor", ["monitor", "run", "--config", str(self.folder / "monitor.yaml")])
            self.addresses["gateway"] = f"http://127.0.0.1:{ports['gateway']}/metrics"
            self.addresses["monitor"] = f"http://127.0.0.1:{ports['monitor']}/metrics"
            self.addresses["page"] = f"http://127.0.0.1:{ports['monitor']}/"
            if prometheus:
                self._start_prometheus(prometheus, ports["prometheus"], ports)
        except BaseException:
            self.stop()
            raise
        self._write_state()

    def _check_contenders(self) -> None:
        """Before anything starts: every side of ``--compare`` and every ``--shadow`` detector is one this stack's
        gateway runs (else a comparison would never see a score, or the gateway would refuse its config)."""
        from detectors.repository import get_detectors
        from gateway.stream.jobs import check_shadow

        o = self.opts
        running = [i.card.name for i in get_detectors(o.detectors)]
        for pair in o.compare:
            for side in split_pair(pair):
                if Contender.parse(side).detector not in running:
                    raise ConfigError(f"--compare {pair}: {side} is not among the detectors this stack runs: {running}")
        if not o.shadow and o.share != 1.0:
            raise ConfigError("--share applies to the --shadow detectors, and none is given")
        try:
            check_shadow(o.shadow, o.share, running)  # (the gateway's own rule, said in the stack's flags)
        except ConfigError as exc:
            raise ConfigError(f"--shadow {','.join(o.shadow)}: {exc}".replace("shadow.detectors", "--shadow")) from None

    def _write_state(self) -> None:
        (self.folder / "stack.json").write_text(
            json.dumps({"addresses": self.addresses, "pids": {k: p.pid for k, p in self.processes.items()}}, indent=2)
        )

    def _configs(self, bootstrap: str, ports: dict[str, int]) -> tuple[GatewayConfig, MonitorConfig]:
        from gateway.core.config import GatewayConfig  # the pipeline's settings import the transforms

        o = self.opts
        gateway = GatewayConfig(
            kafka=KafkaSettings(bootstrap=bootstrap),
            sources={"file_roots": [str(r.resolve()) for r in o.roots]},
            detectors=o.detectors,
            conditions=o.conditions,
            profile=o.profile,
            workers=o.workers,
            http_port=ports["gateway"],
            shadow={"detectors": o.shadow, "share": o.share},
        )
        comparisons = [
            {"champion": champion, "challenger": challenger, "population": population}
            for champion, challenger in map(split_pair, o.compare)
            for population in POPULATIONS  # canaries: labelled comparisons without production labels
        ]
        monitor = MonitorConfig(
            kafka=MonitorKafka(bootstrap=bootstrap),
            http_port=ports["monitor"],
            comparisons=comparisons,
            alerts_from=f"http://127.0.0.1:{ports['prometheus']}" if "prometheus" in ports else None,
            canary_command=self.canary_command if o.compare else None,
        )
        for cfg, name, what, command in (
            (gateway, "gateway.yaml", "gateway", "gateway run"),
            (monitor, "monitor.yaml", "monitor", "monitor run"),
        ):
            header = HEADER.format(what=what, command=command, name=name)
            (self.folder / name).write_text(commented_yaml(cfg, header))
        return gateway, monitor

    @property
    def canary_command(self) -> str:
        """The one command that fills the comparisons' canary side: labelled videos, sent to this stack's gateway
        over and over (the folder of `lastmile examples` has such a manifest)."""
        config = shlex.quote(str(self.folder / "gateway.yaml"))
        return f"lastmile canary run --manifest examples/manifest.jsonl --config {config}"

    def _spawn(self, name: str, args: list[str]) -> None:
        self._launch(name, [sys.executable, "-m", "gateway.cli", *args])

    def _launch(self, name: str, command: list[str]) -> None:
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        self.processes[name] = subprocess.Popen(
            command, stdout=log, stderr=log, start_new_session=True, preexec_fn=die_with_parent()
        )  # its own session (a Ctrl-C is `up`'s to pass on); and it ends if `up` is killed outright
        self._commands[name] = command
        log.close()

    def relaunch(self, name: str) -> None:
        """Start a part that was killed again, as it was started: its topics and offsets are in the broker, so a
        gateway picks up where it committed (the broker itself cannot be: it held the topics in memory)."""
        stop_group(self.processes[name], timeout_s=1)  # what is left of its process group
        self._launch(name, self._commands[name])
        self._write_state()

    def _start_prometheus(self, binary: str, port: int, ports: dict[str, int]) -> None:
        (self.folder / RULES.name).write_text(local(RULES.read_text()))  # (the decision-rate alert: 10 videos, 1 min)
        config = {
            "global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
            "rule_files": [str(self.folder / RULES.name)],
            "scrape_configs": [
                {"job_name": name, "static_configs": [{"targets": [f"127.0.0.1:{ports[name]}"]}]}
                for name in ("gateway", "monitor")
            ],
        }
        (self.folder / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self._launch(
            "prometheus",
            [
                binary,
                f"--config.file={self.folder / 'prometheus.yml'}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--storage.tsdb.path={self.folder / 'prometheus-data'}",
            ],
        )
        self.addresses["prometheus"] = f"http://127.0.0.1:{port}"

    # -- status and stop -------------------------------------------------------------------------------------
    def status(self) -> dict[str, str]:
        """One word per component: starting, ready, not ready, or exited (code)."""
        probes = {
            "gateway": self.addresses.get("gateway", "").replace("/metrics", "/readyz"),
            "monitor": self.addresses.get("monitor", "").replace("/metrics", "/readyz"),
            "prometheus": self.addresses.get("prometheus", "") + "/-/ready",
        }
        out = {}
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                out[name] = f"exited ({proc.returncode})"
            elif name == "broker":
                out[name] = "ready"  # start_broker returned: it accepts Kafka clients
            else:
                out[name] = _probe(probes[name])
        return out

    def exited(self) -> list[str]:
        return [name for name, proc in self.processes.items() if proc.poll() is not None]

    def stop(self) -> None:
        """Stop every process group started, the gateway first (it finishes and commits what it holds)."""
        for name in ("gateway", "monitor", "prometheus", "broker"):
            proc = self.processes.get(name)
            if proc is not None:
                stop_group(proc, timeout_s=70 if name == "gateway" else 15)


def _probe(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return "ready" if r.status == 200 else "not ready"
    except urllib.error.HTTPError:
        return "not ready"
    except OSError:
        return "starting"
