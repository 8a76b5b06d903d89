"""A gateway between the recorder and the MCP server, as one response shows it (issue 21).

A proxy in the path says so: a ``Via`` header, a ``Server`` header naming a proxy product (it replaces the
server's own), or an error page of its own making (a 5xx in HTML, which no MCP server writes). Seen from
in front of it, what it did behind (its retries, the attempts it sent to other upstreams, its timeouts) is
not in the capture; the analysis says so once (``CallStream.notes``).
"""

from __future__ import annotations

import re

from mcp_blackbox.analyzer.model.records import Exchange

# Server products that are proxies and gateways (lower case, before any "/version").
GATEWAY_SERVERS = frozenset({
    "nginx", "openresty", "caddy", "envoy", "istio-envoy", "haproxy", "traefik", "kong", "cloudflare",
    "awselb", "apisix", "tengine",
})  # fmt: skip
# The words of a gateway's own error page, and whose they are.
ERROR_PAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"<center>\s*(nginx|openresty)\b", re.IGNORECASE), r"\1"),
    (re.compile(r"no server is available to handle this request", re.IGNORECASE), "haproxy"),
    (re.compile(r"upstream connect error or disconnect/reset before headers", re.IGNORECASE), "envoy"),
    (re.compile(r"no healthy upstream", re.IGNORECASE), "envoy"),
)


def gateway_sign(exchange: Exchange) -> tuple[str, str] | None:
    """(the gateway's name, how the response shows it), or None when nothing shows one."""
    headers = exchange.response_headers
    if via := headers.get("via"):
        # "1.1 varnish, 1.1 nginx": the last hop's name (a pseudonym or a product).
        last = via.split(",")[-1].strip().split()
        return (last[-1].lower() if last else "a proxy"), f"Via: {via}"
    product = headers.get("server", "").split("/")[0].split()[0].lower() if headers.get("server") else ""
    if product in GATEWAY_SERVERS:
        return product, f"Server: {headers['server']}"
    if exchange.status is not None and exchange.status >= 500 and exchange.error_text:
        for pattern, name in ERROR_PAGES:
            if found := pattern.search(exchange.error_text):
                return found.expand(name).lower(), f"its HTTP {exchange.status} error page"
    return None
