"""The deployment examples of ``deploy/`` (Compose and Kubernetes): they parse, and the names, ports and settings
that must agree across files do (no Docker daemon or Kubernetes runs here; ``deploy/README.md`` says so)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from hotspan.settings import ENVIRONMENT, ROLES, load_settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def _k8s(name: str) -> dict[tuple[str, str], dict[str, Any]]:
    documents = yaml.safe_load_all((DEPLOY / "k8s" / name).read_text())
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in documents}


def _role(command: list[str]) -> str | None:
    return command[command.index("--role") + 1] if "--role" in command else None


def _cluster_xml() -> ET.Element:
    return ET.parse(DEPLOY / "clickhouse" / "cluster.xml").getroot()


def test_compose_runs_the_issue_s_topology_on_a_cluster_its_servers_define() -> None:
    services = _compose()["services"]
    roles = [_role(service.get("command", [])) for service in services.values()]
    assert sorted(role for role in roles if role) == ["collector", "collector", "pipeline", "query"]
    assert set(roles) - {None} <= set(ROLES)

    cluster = _cluster_xml().find("remote_servers")
    assert cluster is not None and len(cluster) == 1
    shards = [[replica.findtext("host") for replica in shard.iter("replica")] for shard in cluster[0]]
    assert shards == [["ch-s1-r1", "ch-s1-r2"], ["ch-s2-r1", "ch-s2-r2"]]
    for shard_number, hosts in enumerate(shards, start=1):
        for host in hosts:
            assert services[host]["environment"] == {
                "CLICKHOUSE_SKIP_USER_SETUP": "1",
                "CH_SHARD": str(shard_number),
                "CH_REPLICA": host,
            }
    assert _cluster_xml().find("zookeeper/node/host").text in services  # type: ignore[union-attr]

    for name, service in services.items():
        if not service.get("image", "").startswith("hotspan:"):
            continue
        environment = service["environment"]
        assert set(environment) <= set(ENVIRONMENT.values()), name
        assert environment["HOTSPAN_CLICKHOUSE_CLUSTER"] == cluster[0].tag
        host = re.match(r"http://[^@]*@([\w-]+):8123$", environment["HOTSPAN_CLICKHOUSE_DSN"])
        assert host and host[1] in services, name


def test_compose_settings_load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each Hotspan service's environment is valid settings (the pipeline's shard among them), naming the cluster
    and database whose replicated DDL ``tests/storage/test_cluster_layout.py`` parses with ClickHouse's parser."""
    for service in _compose()["services"].values():
        if not service.get("image", "").startswith("hotspan:"):
            continue
        with monkeypatch.context() as patch:
            for key, value in service["environment"].items():
                patch.setenv(key, value)
            settings = load_settings(data_dir=tmp_path)
        assert settings.layout.cluster == "hotspan" and settings.layout.replicated
        assert settings.clickhouse_database == "otel"


def test_otlp_is_balanced_over_the_collectors_and_routed_by_trace_id() -> None:
    services = _compose()["services"]
    collectors = sorted(name for name, s in services.items() if _role(s.get("command", [])) == "collector")
    nginx = (DEPLOY / "nginx.conf").read_text()
    for port in ("4317", "4318"):
        assert sorted(re.findall(rf"server ([\w-]+):{port}", nginx)) == collectors
    assert sorted(services["otlp-lb"]["ports"]) == ["4317:4317", "4318:4318"]

    compose_otelcol = yaml.safe_load((DEPLOY / "otel-collector.yaml").read_text())
    k8s_otelcol = yaml.safe_load(_k8s("hotspan.yaml")[("ConfigMap", "hotspan-otelcol")]["data"]["config.yaml"])
    for config in (compose_otelcol, k8s_otelcol):
        exporter = config["exporters"]["loadbalancing"]
        assert exporter["routing_key"] == "traceID"
        assert config["service"]["pipelines"]["traces"]["exporters"] == ["loadbalancing"]
    assert compose_otelcol["exporters"]["loadbalancing"]["resolver"]["dns"]["hostname"] == "hotspan-collectors"
    for name in collectors:
        assert services[name]["networks"]["default"]["aliases"] == ["hotspan-collectors"]
    assert k8s_otelcol["exporters"]["loadbalancing"]["resolver"]["k8s"]["service"] == "hotspan-collectors.hotspan"


def test_kubernetes_example_runs_two_by_two_shards_with_keeper_and_each_role() -> None:
    clickhouse = _k8s("clickhouse.yaml")
    hotspan = _k8s("hotspan.yaml")
    (chi,) = [doc for (kind, _), doc in clickhouse.items() if kind == "ClickHouseInstallation"]
    ((_, keeper_name),) = [key for key in clickhouse if key[0] == "ClickHouseKeeperInstallation"]
    (cluster,) = chi["spec"]["configuration"]["clusters"]
    assert cluster["layout"] == {"shardsCount": 2, "replicasCount": 2}
    assert chi["spec"]["configuration"]["zookeeper"]["nodes"][0]["host"] == f"keeper-{keeper_name}"
    assert hotspan[("ConfigMap", "hotspan-env")]["data"]["HOTSPAN_CLICKHOUSE_CLUSTER"] == cluster["name"]

    replicas = {}
    for (kind, _), doc in hotspan.items():
        if kind in ("Deployment", "StatefulSet", "Job"):
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            if not container["image"].startswith("hotspan:"):
                continue
            replicas[_role(container["args"]) or container["args"][0]] = doc["spec"].get("replicas", 1)
            for variable in container.get("env", []):
                assert not variable["name"].startswith("HOTSPAN_") or variable["name"] in ENVIRONMENT.values()
    assert replicas == {"migrate": 1, "collector": 2, "pipeline": 1, "query": 1}
