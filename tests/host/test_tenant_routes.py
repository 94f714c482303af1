"""tenants.toml: which cluster each tenant lives in, read strictly and rewritten whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram_memory.host.settings import HostPaths, SettingsError, StoreSettings
from engram_memory.host.tenant_routes import (
    Cluster,
    RoutesWatcher,
    TenantRoutes,
    parse_routes,
    read_routes,
    write_routes,
)

EAST = Cluster(store="postgresql://o@east/engram", read_urls=("postgresql://o@east-standby/engram",))


def test_routes_round_trip_and_give_each_tenant_its_cluster_s_settings(tmp_path: Path) -> None:
    paths = HostPaths(home=tmp_path)
    assert read_routes(paths) == TenantRoutes()  # no file: every tenant at home
    routes = TenantRoutes({"east": EAST}, {"acme": "east"})
    write_routes(paths, routes)
    assert read_routes(paths) == routes
    assert (paths.tenants.stat().st_mode & 0o777) == 0o600
    home = StoreSettings(store="postgresql://o@west/engram", app_role="app", vault="postgresql://o@west/keys")
    assert routes.cluster_of("acme") == "east" and routes.cluster_of("beta") == "home"
    east = routes.settings_for(home, "east")
    assert (east.store, east.vault, east.app_role, east.read_urls) == (EAST.store, home.vault, "app", EAST.read_urls)
    assert routes.settings_for(home, "home") == home
    assert routes.moved("acme", "home").tenants == {}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[clusters.east]\nstore = 'mysql://x/y'\n", "store must be a postgresql"),
        ("[clusters.home]\nstore = 'postgresql://o@h/d'\n", "not a cluster name"),
        ("[clusters.east]\nstore = 'postgresql://o@h/d'\nvault = 'postgresql://o@h/k'\n", "takes store"),
        ("[tenants]\nacme = 'nowhere'\n", "names no cluster"),
        ("colour = 'blue'\n", "unknown key"),
    ],
)
def test_routes_refuse_what_cannot_be_used(text: str, named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        parse_routes(text)


def test_a_watcher_reads_the_map_again_once_it_changed(tmp_path: Path) -> None:
    paths = HostPaths(home=tmp_path)
    write_routes(paths, TenantRoutes({"east": EAST}, {}))
    watcher = RoutesWatcher(paths, read_routes(paths))
    assert watcher.current().cluster_of("acme") == "home"
    write_routes(paths, TenantRoutes({"east": EAST}, {"acme": "east"}))
    assert watcher.current().cluster_of("acme") == "east"
    paths.tenants.write_text("not = [toml", encoding="utf-8")  # a broken file keeps the last good map
    assert watcher.current().cluster_of("acme") == "east"
