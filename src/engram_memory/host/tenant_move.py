"""Moving one tenant to another PostgreSQL cluster while its agents work (`engram-memory tenants move`).

1. The target is migrated and granted, and any rows of the tenant a failed move left there are deleted.
2. The source is fenced: from then on it refuses every write for the tenant (a retriable
   STORE_UNAVAILABLE; the agent's retry with the same key goes where the map will send it). Reads go on.
3. The tenant's rows are copied from one snapshot of the source to the target in one transaction.
4. `verify` runs on the target; on any difference the copy is deleted and the fence lifted.
5. tenants.toml sends the tenant to the target: every serving process reads it before its next call.
6. The tenant's rows are deleted from the source, whose index tables are then rewritten (erasure), and
   the fence stays, so a process that had not read the new map yet cannot write there.

Writes of the tenant wait (retried by their agents) for steps 2 to 5: the time of one copy and one verify.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engram_memory.host.backends import store_backend
from engram_memory.host.compose import HomeError, open_engine
from engram_memory.host.language.catalogue import _
from engram_memory.host.settings import HostPaths, store_settings
from engram_memory.host.tenant_routes import TenantRoutes, home_routes, write_routes

if TYPE_CHECKING:
    from engram_memory.host.settings import StoreSettings
    from engram_memory.stores.postgres.connection import Connection

logger = logging.getLogger(__name__)


class MoveRefused(Exception):
    """The move did not happen (a one-line reason); the tenant is where it was and writable there."""


@dataclass(frozen=True, slots=True)
class Moved:
    tenant: str
    source: str
    target: str
    copied: dict[str, int]
    seconds_fenced: float


def move_tenant(paths: HostPaths, tenant: str, target: str) -> Moved:
    """Raises MoveRefused, HomeError."""
    import psycopg

    home = store_settings(paths)
    if not store_backend(paths, home).runtime_role:  # the embedded store: one file, one machine
        raise HomeError(_("tenants live in several clusters only on a PostgreSQL home"))
    routes = home_routes(paths)
    try:
        source = routes.cluster_of(tenant)
        source_settings, target_settings = routes.settings_for(home, source), routes.settings_for(home, target)
    except (OSError, ValueError) as exc:
        raise MoveRefused(str(exc)) from exc
    if source == target:
        if _drop_left_copies(routes, home, tenant, target):
            return Moved(tenant, source, target, {}, 0.0)
        raise MoveRefused(
            _("tenant '{tenant}' already lives in cluster '{target}'").format(tenant=tenant, target=target)
        )
    store_backend(paths, target_settings).install([])  # migrations and the runtime role's grants
    try:
        with (
            psycopg.connect(_owner_url(source_settings), autocommit=True) as from_db,
            psycopg.connect(_owner_url(target_settings), autocommit=True) as to_db,
        ):
            copied, seconds = _move(paths, routes, tenant, target, from_db, to_db)
    except psycopg.Error as exc:
        raise MoveRefused(
            _("PostgreSQL refused the move ({name}); the tenant stays where it was").format(name=type(exc).__name__)
        ) from exc
    if not erase_cluster(paths, source):
        logger.warning("cluster '%s': the moved tenant's rows await the next erasure pass", source)
    return Moved(tenant, source, target, copied, seconds)


def _move(
    paths: HostPaths, routes: TenantRoutes, tenant: str, target: str, from_db: Connection, to_db: Connection
) -> tuple[dict[str, int], float]:
    from engram_memory.stores.postgres import tenant_copy

    if not any(tenant_copy.row_counts(from_db, tenant).values()):
        raise MoveRefused(_("its cluster holds nothing of tenant '{tenant}'").format(tenant=tenant))
    with to_db.transaction():
        tenant_copy.delete_tenant(to_db, tenant)  # what a failed move left
    fenced_at = time.monotonic()
    tenant_copy.fence(from_db, tenant, target, int(time.time() * 1000))
    try:
        with to_db.transaction():
            tenant_copy.unfence(to_db, tenant)  # it may have lived there before
            copied = tenant_copy.copy_tenant(from_db, to_db, tenant)
        _verify(paths, target)
        write_routes(paths, routes.moved(tenant, target))
    except BaseException:
        with to_db.transaction():
            tenant_copy.delete_tenant(to_db, tenant)
        with from_db.transaction():
            tenant_copy.unfence(from_db, tenant)
        raise
    seconds = time.monotonic() - fenced_at
    tenant_copy.drop_tenant(from_db, tenant)  # the fence stays: a process on the old map cannot write here
    return copied, seconds


def _drop_left_copies(routes: TenantRoutes, home: StoreSettings, tenant: str, target: str) -> bool:
    """Finishes a move cut short after the map changed: the copies other clusters still hold (fenced) are
    deleted and erased. Whether there was any."""
    import psycopg

    from engram_memory.stores.postgres import tenant_copy

    dropped = False
    for name in routes.names():
        if name == target:
            continue
        try:
            with psycopg.connect(_owner_url(routes.settings_for(home, name)), autocommit=True) as db:
                if not tenant_copy.fenced_copy(db, tenant):
                    continue
                tenant_copy.drop_tenant(db, tenant)
        except psycopg.Error as exc:
            raise MoveRefused(
                _("cluster '{name}' could not be reached ({name2})").format(name=name, name2=type(exc).__name__)
            ) from exc
        dropped = True
    return dropped


def _owner_url(settings: StoreSettings) -> str:
    return settings.direct_url or settings.store


def _verify(paths: HostPaths, cluster: str) -> None:
    with open_engine(paths, cluster=cluster, semantic=False) as engine:
        first = engine.verify(full=True).first
    if first is not None:
        raise MoveRefused(
            _("the copy does not verify on the target ({line}); nothing was moved").format(line=first.line)
        )


def erase_cluster(paths: HostPaths, cluster: str) -> bool:
    """The cluster's index tables rewritten now, so a moved tenant's words leave its live files; False when
    an open snapshot still sees them (the cluster's housekeeping finishes it)."""
    with open_engine(paths, cluster=cluster, semantic=False) as engine:
        return engine.erase_now()
