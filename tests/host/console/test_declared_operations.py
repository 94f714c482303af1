"""A host operation is declared once (engine/lifecycle/host_operations.py) and every edge is made from it.

A ninth operation is registered here the way a new one would be added, one entry plus its engine
function, and is then found and run through `HostFront`, the `records` command group and the console's
maintenance form, with nothing else touched.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from engram_memory.engine.deps import Deps
from engram_memory.engine.lifecycle import host_operations, host_transitions
from engram_memory.engine.lifecycle.host_operations import Argument, HostOperation, declare
from engram_memory.engine.lifecycle.host_transitions import MaintenanceOutcome, MaintenanceRefused
from engram_memory.engine.refusals import Refusal
from engram_memory.host.cli import records
from tests.host.console.conftest import DECIDER, Site


def flag_for_audit(
    deps: Deps, record_id: str, *, auditor: str, decided_by: str, reason_ref: str | None = None
) -> MaintenanceOutcome:
    """The dummy's engine function: a dispute whose reason names the auditor."""
    return host_transitions.dispute(deps, record_id, decided_by=decided_by, reason_ref=f"audit:{auditor}")


AUDITOR = Argument("auditor", "--auditor", "NAME", "Auditor", "Who audits the record.", required=True)
NINTH = HostOperation(
    "flag_for_audit",
    "Flag for audit",
    "accepted_current -> accepted_disputed, naming who audits it.",
    "This takes the record out of search until its auditor resolves it.",
    flag_for_audit,
    (AUDITOR,),
)


@pytest.fixture
def ninth(monkeypatch: pytest.MonkeyPatch) -> Iterator[HostOperation]:
    monkeypatch.setattr(host_operations, "HOST_OPERATIONS", declare(*host_operations.HOST_OPERATIONS.values(), NINTH))
    yield NINTH


def _history(site: Site, record_id: str) -> list[tuple[Any, ...]]:
    details = site.engine.record_details(record_id)
    return [(event.body["data"]["to_state"], event.body["data"].get("reason_ref")) for event in details.history[1:]]


def test_host_front_lists_and_runs_a_registered_operation(signed_in: Site, ninth: HostOperation) -> None:
    record_id = signed_in.remembered("The audit trail lives in the finance share.")
    assert signed_in.engine.host_operations()["flag_for_audit"] is ninth
    outcome = signed_in.engine.transition("flag_for_audit", record_id, decided_by=DECIDER, auditor="kim")
    assert (outcome.primary.from_state, outcome.primary.to_state) == ("accepted_current", "accepted_disputed")
    assert _history(signed_in, record_id) == [("accepted_disputed", "audit:kim")]
    with pytest.raises(MaintenanceRefused) as missing:
        signed_in.engine.transition("flag_for_audit", record_id, decided_by=DECIDER)
    assert missing.value.refusal is Refusal.ARGUMENT_MISSING and str(missing.value) == "flag_for_audit needs --auditor"


def test_the_records_command_group_offers_a_registered_operation(signed_in: Site, ninth: HostOperation) -> None:
    record_id = signed_in.remembered("Payroll closes on the 25th.")
    app = typer.Typer(rich_markup_mode=None)
    records.register(app)
    runner = CliRunner()
    shown = runner.invoke(app, ["records", "flag-for-audit", "--help"])
    assert shown.exit_code == 0 and ninth.help in " ".join(shown.output.split()) and "--auditor NAME" in shown.output
    refused = runner.invoke(app, ["records", "flag-for-audit", record_id, "--home", str(signed_in.paths.home)])
    assert refused.exit_code == 2 and "--auditor" in refused.output
    done = runner.invoke(
        app, ["records", "flag-for-audit", record_id, "--auditor", "lee", "--home", str(signed_in.paths.home)]
    )
    assert done.exit_code == 0, done.output
    assert _history(signed_in, record_id) == [("accepted_disputed", "audit:lee")]


def test_the_console_form_offers_a_registered_operation(signed_in: Site, ninth: HostOperation) -> None:
    record_id = signed_in.remembered("Quarter-end reports go to the CFO.")
    page = html.unescape(signed_in.client.get(f"/records/{record_id}").text)
    assert '<option value="flag_for_audit">Flag for audit</option>' in page and 'name="auditor"' in page
    form = {"operation": "flag_for_audit", "auditor": "park"}
    asked = html.unescape(signed_in.post(f"/records/{record_id}/action", form).text)
    assert ninth.explains in asked and 'name="auditor" value="park"' in asked
    assert _history(signed_in, record_id) == []
    without = signed_in.post(f"/records/{record_id}/action", {"operation": "flag_for_audit", "confirmed": "yes"})
    assert without.status_code == 303 and _history(signed_in, record_id) == []
    done = signed_in.post(f"/records/{record_id}/action", {**form, "confirmed": "yes"})
    assert done.status_code == 303 and "accepted_disputed" in done.headers["location"]
    assert _history(signed_in, record_id) == [("accepted_disputed", "audit:park")]
