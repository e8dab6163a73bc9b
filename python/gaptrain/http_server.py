"""The trainer's HTTP endpoints on --http-port, as gaptrain-worker's
(services/net/metrics_endpoint.cc): GET /healthz answers 200 "ok" while the
process serves (the pod's readiness and liveness probes), GET /metrics the
metrics in the Prometheus text format. A stdlib ThreadingHTTPServer on a
daemon thread."""

import http.server
import logging
import os
import threading

from gaptrain import metrics as metrics_mod

log = logging.getLogger("gaptrain")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self, with_body):
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            status, ctype, body = 200, "text/plain", b"ok"
        elif path == "/metrics":
            status, ctype = 200, metrics_mod.CONTENT_TYPE
            body = self.server.metrics.render().encode()
        else:
            status, ctype, body = 404, "text/plain", b"not found"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's name)
        self._answer(True)

    def do_HEAD(self):  # noqa: N802
        self._answer(False)

    def log_message(self, fmt, *args):  # probes every few seconds: not worth a log line
        log.debug("http: " + fmt, *args)


class HttpServer:
    """Serves /healthz and /metrics of `metrics` on (address, port); port 0
    picks a free one (`port` tells which). Writes `ports_file` (the port in
    decimal, as services/net/ports_file.h) once listening."""

    def __init__(self, metrics, address="0.0.0.0", port=9092, ports_file=""):
        self._server = http.server.ThreadingHTTPServer((address, port), _Handler)
        self._server.daemon_threads = True
        self._server.metrics = metrics
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="gaptrain-http", daemon=True)
        self._thread.start()
        if ports_file:
            tmp = "%s.tmp.%d" % (ports_file, os.getpid())
            with open(tmp, "w") as f:
                f.write("%d\n" % self.port)
            os.replace(tmp, ports_file)

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=1.0)
