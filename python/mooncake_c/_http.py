"""The client HTTP server of setup(enable_client_http_server=True): GET /metrics (this client's
own counts, the Prometheus text of mc_client_metrics_text) and GET /health, on a daemon thread,
as upstream's Python client serves them on client_http_port."""

import http.server
import logging
import threading

_log = logging.getLogger("mooncake_c")
PROM_TYPE = "text/plain; version=0.0.4"


class MetricsServer:
    """Serves metrics_text() (a callable returning (rc, str)) on host:port (0 = a free port)
    until close(). OSError when the address cannot be bound."""

    def __init__(self, host, port, metrics_text):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    rc, text = metrics_text()
                    status, ctype, body = ((200, PROM_TYPE, text) if rc >= 0 else
                                           (503, "text/plain", "client closed\n"))
                elif path == "/health":
                    status, ctype, body = 200, "text/plain", "OK\n"
                else:
                    status, ctype, body = 404, "text/plain", "not found\n"
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, fmt, *args):  # no access log on stderr
                pass

        self._srv = http.server.ThreadingHTTPServer((host, port), Handler)
        self._srv.daemon_threads = True
        self._thread = threading.Thread(target=self._srv.serve_forever, name="mc-client-http",
                                        daemon=True)
        self._thread.start()

    @property
    def address(self):
        """"host:port" it serves on."""
        host, port = self._srv.server_address[:2]
        return "%s:%d" % (host, port)

    def close(self):
        self._srv.shutdown()
        self._srv.server_close()
        self._thread.join()
