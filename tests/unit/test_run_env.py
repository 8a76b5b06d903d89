"""The environment `mcp-blackbox run` gives COMMAND (cli/run_command.py), without starting anything."""

from __future__ import annotations

from pathlib import Path

from mcp_blackbox.cli.run_command import client_environment, node_has_env_proxy, preload_path, without_loopback

PROXY = "http://127.0.0.1:40000"
BUNDLE = Path("/tmp/run/ca-bundle.pem")


def test_no_proxy_loses_only_its_loopback_entries() -> None:
    assert without_loopback("localhost,127.0.0.1,::1,[::1],.internal.example, corp.example") == (
        ".internal.example,corp.example"
    )
    assert without_loopback("LOCALHOST 127.0.0.0/8") == ""


def test_proxy_ca_and_node_variables() -> None:
    base = {
        "NO_PROXY": "localhost,127.0.0.1",
        "no_proxy": "localhost,corp.example",
        "NODE_OPTIONS": "--max-old-space-size=512",
    }
    env, notes = client_environment(base, PROXY, BUNDLE, (20, 20, 2))
    assert [env[n] for n in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")] == [PROXY] * 4
    assert "NO_PROXY" not in env and env["no_proxy"] == "corp.example"
    assert {env[n] for n in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")} == {
        str(BUNDLE)
    }
    assert env["NODE_USE_ENV_PROXY"] == "1"
    assert env["NODE_OPTIONS"] == f'--max-old-space-size=512 --import="{preload_path().as_uri()}"'
    assert preload_path().is_file() and notes == ["Node 20.20.2: fetch through the preload proxy-preload.mjs"]


def test_node_versions() -> None:
    assert not node_has_env_proxy((20, 20, 2)) and not node_has_env_proxy((22, 20, 0))
    assert node_has_env_proxy((22, 21, 0)) and node_has_env_proxy((24, 0, 0)) and node_has_env_proxy((25, 1, 0))
    env, notes = client_environment({}, PROXY, BUNDLE, (24, 11, 0))
    assert notes == ["Node 24.11.0: NODE_USE_ENV_PROXY=1"] and "--import=" in env["NODE_OPTIONS"]
    env, notes = client_environment({}, PROXY, BUNDLE, (18, 12, 0))
    assert "NODE_OPTIONS" not in env and "has no --import" in notes[0], "an old Node would refuse the option"
