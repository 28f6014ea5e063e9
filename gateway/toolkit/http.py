"""The service's HTTP endpoints: ``/metrics`` is prometheus_client's own WSGI app (content negotiation with
OpenMetrics, gzip, ``name[]`` filtering), beside ``/healthz`` (the loop is alive) and ``/readyz`` (it can take
work). Served by a threaded WSGI server on a daemon thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

StartResponse = Callable[..., object]
WsgiApp = Callable[[dict, StartResponse], Iterable[bytes]]
Pages = Callable[[dict, StartResponse], Iterable[bytes] | None]  # None: not one of its paths
PROBES = {"/healthz": (b"ok", b"stalled"), "/readyz": (b"ready", b"not ready")}
MAX_REASON_BYTES = 2000  # of a not-ready body


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return


def endpoints_app(
    registry: CollectorRegistry,
    healthy: Callable[[], bool],
    ready: Callable[[], bool],
    why: Callable[[], str] | None = None,
    pages: Pages | None = None,
) -> WsgiApp:
    """A WSGI app: ``/metrics`` from ``registry``; ``/healthz`` and ``/readyz`` answer 200 or 503 as the
    callables say (a 503 from ``/readyz`` followed by ``why()``, when given); then ``pages``, when given, for
    the paths it serves (the monitor's live page); anything else is 404."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics(environ, start_response)
        if path in PROBES:
            yes, no = PROBES[path]
            ok = healthy() if path == "/healthz" else ready()
            body, status = (yes, "200 OK") if ok else (no, "503 Service Unavailable")
            if not ok and path == "/readyz" and why is not None:
                body += b": " + why().encode(errors="replace")[:MAX_REASON_BYTES]
        elif pages is not None and (served := pages(environ, start_response)) is not None:
            return served
        else:
            body, status = b"not found", "404 Not Found"
        start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]

    return app


class CannotListen(OSError):
    """The health and metrics endpoints cannot listen where configured (the port taken, the address not here)."""


class Endpoints:
    """The endpoints served on ``host:port`` (port 0: any free port, see :attr:`port`) until :meth:`close`.
    Raises :class:`CannotListen` where it cannot bind."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        why: Callable[[], str] | None = None,
        pages: Pages | None = None,
    ) -> None:
        app = endpoints_app(registry, healthy, ready, why, pages)
        try:
            self.server = make_server(host, port, app, _ThreadingServer, handler_class=_QuietHandler)
        except OSError as exc:
            why = f"{exc.strerror or exc} (http_host, http_port)"
            raise CannotListen(f"cannot serve /metrics and health on {host}:{port}: {why}") from exc
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="lastmile-http")
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
