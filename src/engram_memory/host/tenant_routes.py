"""Which PostgreSQL cluster each tenant lives in: `tenants.toml` in the home, beside config.toml.

    [clusters.east]
    store = "postgresql://engram_owner@east.internal/engram"
    read_urls = ["postgresql://engram_owner@east-standby.internal/engram"]  # optional
    direct_url = "postgresql://engram_owner@east.internal/engram"    # optional

    [tenants]
    acme = "east"

A tenant not named lives in the home's own store (the cluster `home`). Every cluster shares the home's
keys, runtime role, pool size and prepared-statement setting, and its key vault: one vault holds every
tenant's data keys, the revocations every engine checks, and the people who sign in.
`engram-memory tenants move` rewrites the file; a serving process reads it again whenever it changed,
before each call.
"""

from __future__ import annotations

import os
import re
import threading
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from engram_memory.host.language.catalogue import _
from engram_memory.host.settings import (
    HomeError,
    HostPaths,
    SettingsError,
    StoreSettings,
    optional_postgres_url,
    postgres_urls,
    toml_string,
)

HOME_CLUSTER = "home"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")


@dataclass(frozen=True, slots=True)
class Cluster:
    store: str
    read_urls: tuple[str, ...] = ()
    direct_url: str | None = None


@dataclass(frozen=True, slots=True)
class TenantRoutes:
    clusters: Mapping[str, Cluster] = field(default_factory=dict)
    tenants: Mapping[str, str] = field(default_factory=dict)

    def cluster_of(self, tenant: str) -> str:
        return self.tenants.get(tenant, HOME_CLUSTER)

    def names(self) -> list[str]:
        """Every cluster, the home's first."""
        return [HOME_CLUSTER, *sorted(self.clusters)]

    def settings_for(self, home: StoreSettings, cluster: str) -> StoreSettings:
        """The home's store settings, with the cluster's databases. Raises SettingsError for an unknown name."""
        if cluster == HOME_CLUSTER:
            return home
        if cluster not in self.clusters:
            raise SettingsError(_("tenants.toml names no cluster '{cluster}'").format(cluster=cluster))
        chosen = self.clusters[cluster]
        return replace(
            home,
            store=chosen.store,
            read_urls=chosen.read_urls,
            direct_url=chosen.direct_url,
        )

    def moved(self, tenant: str, cluster: str) -> TenantRoutes:
        tenants = {name: where for name, where in self.tenants.items() if name != tenant}
        if cluster != HOME_CLUSTER:
            tenants[tenant] = cluster
        return TenantRoutes(self.clusters, tenants)

    def to_toml(self) -> str:
        lines = ["# Which cluster each tenant lives in (engram-memory tenants move rewrites this file)."]
        for name in sorted(self.clusters):
            cluster = self.clusters[name]
            lines += ["", f"[clusters.{name}]", f"store = {toml_string(cluster.store)}"]
            if cluster.read_urls:
                lines.append(f"read_urls = [{', '.join(toml_string(url) for url in cluster.read_urls)}]")
            if cluster.direct_url is not None:
                lines.append(f"direct_url = {toml_string(cluster.direct_url)}")
        lines += ["", "[tenants]"]
        lines += [f"{toml_string(tenant)} = {toml_string(cluster)}" for tenant, cluster in sorted(self.tenants.items())]
        return "\n".join(lines) + "\n"


def parse_routes(text: str) -> TenantRoutes:
    """Raises SettingsError naming what is wrong, and tomllib.TOMLDecodeError for text that is not TOML."""
    config: dict[str, Any] = tomllib.loads(text)
    unknown = set(config) - {"clusters", "tenants"}
    if unknown:
        raise SettingsError(_("tenants.toml: unknown key '{key}'").format(key=sorted(unknown)[0]))
    clusters_in, tenants_in = config.get("clusters", {}), config.get("tenants", {})
    if not isinstance(clusters_in, dict) or not isinstance(tenants_in, dict):
        raise SettingsError(_("tenants.toml: [clusters] and [tenants] must be tables"))
    clusters = {name: _cluster(name, value) for name, value in clusters_in.items()}
    for tenant, cluster in tenants_in.items():
        if not isinstance(cluster, str) or (cluster != HOME_CLUSTER and cluster not in clusters):
            raise SettingsError(
                _("tenants.toml: tenant '{tenant}' names no cluster of [clusters]").format(tenant=tenant)
            )
    return TenantRoutes(clusters, {tenant: str(cluster) for tenant, cluster in tenants_in.items()})


def _cluster(name: str, value: object) -> Cluster:
    if not _NAME.fullmatch(name) or name == HOME_CLUSTER:
        raise SettingsError(
            _("tenants.toml: '{name}' is not a cluster name (a-z, 0-9, _ and -; not 'home')").format(name=name)
        )
    if not isinstance(value, dict) or set(value) - {"store", "read_urls", "direct_url"}:
        raise SettingsError(
            _("tenants.toml: [clusters.{name}] takes store, read_urls and direct_url").format(name=name)
        )
    where = f"tenants.toml: [clusters.{name}]"
    store = optional_postgres_url(value.get("store"), f"{where} store")
    if store is None:
        raise SettingsError(_("{where} store must be a postgresql:// URL").format(where=where))
    return Cluster(
        store=store,
        read_urls=postgres_urls(value.get("read_urls", []), f"{where} read_urls"),
        direct_url=optional_postgres_url(value.get("direct_url"), f"{where} direct_url"),
    )


def read_routes(paths: HostPaths) -> TenantRoutes:
    """The home's routing map; an empty one (every tenant at home) when it has no tenants.toml.
    Raises SettingsError, OSError, tomllib.TOMLDecodeError."""
    try:
        text = paths.tenants.read_text(encoding="utf-8")
    except FileNotFoundError:
        return TenantRoutes()
    return parse_routes(text)


def home_routes(paths: HostPaths) -> TenantRoutes:
    """read_routes for a host command. Raises HomeError."""
    try:
        return read_routes(paths)
    except (OSError, ValueError) as exc:  # SettingsError and TOMLDecodeError are ValueErrors
        raise HomeError(_("cannot read {tenants}: {exc}").format(tenants=paths.tenants, exc=exc)) from exc


def write_routes(paths: HostPaths, routes: TenantRoutes) -> None:
    """Replaces tenants.toml at once (a reader sees the old map or the new one, never half of it)."""
    temporary = paths.tenants.with_name(f".{paths.tenants.name}.{os.getpid()}.tmp")
    temporary.write_text(routes.to_toml(), encoding="utf-8")
    temporary.chmod(0o600)
    temporary.replace(paths.tenants)


class RoutesWatcher:
    """The routing map as the file says now: read again when its modification time or size changed.
    Thread-safe; a file that cannot be read keeps the last map that could (and logs nothing: the next
    call tries again)."""

    def __init__(self, paths: HostPaths, routes: TenantRoutes) -> None:
        self._paths = paths
        self._routes = routes
        self._seen = self._stamp()
        self._lock = threading.Lock()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            stat = self._paths.tenants.stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def current(self) -> TenantRoutes:
        stamp = self._stamp()
        with self._lock:
            if stamp != self._seen:
                try:
                    self._routes = read_routes(self._paths)
                    self._seen = stamp
                except (OSError, ValueError):  # SettingsError and TOMLDecodeError are ValueErrors
                    pass
            return self._routes
