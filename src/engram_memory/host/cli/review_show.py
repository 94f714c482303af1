"""How `review show` prints a decrypted candidate for a person: each part of its payload and evidence in
turn, what a detector found marked, and the current memories it would compete with beside it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from engram_memory.contract.payloads import primary_text
from engram_memory.engine.admission.review import CandidateView
from engram_memory.engine.secrets import SecretFinding
from engram_memory.host.cli.common import out, say
from engram_memory.host.finding_spans import merged_spans
from engram_memory.host.language.catalogue import _
from engram_memory.host.language.formats import number, when
from engram_memory.host.language.words import review_reason
from engram_memory.host.terminal import inline, printable

_MARK_STYLE = "bold white on red"


def say_line(text: str) -> None:
    """One line of the rendering; ids and refs an agent chose are opaque strings, so they are escaped too."""
    say(text)


class _Renderer:
    """Prints the decrypted candidate; a span a detector found is highlighted (marked in plain text)."""

    def __init__(self, findings: Sequence[SecretFinding], *, terminal: bool) -> None:
        self._terminal = terminal
        self._by_path: dict[str, list[SecretFinding]] = {}
        for finding in findings:
            self._by_path.setdefault(finding.path, []).append(finding)

    def marked(self, value: str, path: str, *, lines: bool = True) -> Text:
        text, position = Text(), 0
        for start, end, categories in merged_spans(self._by_path.get(path, [])):
            text.append(printable(value[position:start], lines=lines))
            names = ", ".join(categories)
            if self._terminal:
                text.append(printable(value[start:end], lines=lines), style=_MARK_STYLE)
                text.append(f" [{names}]", style="bold red")
            else:
                text.append(f"[[{names}: {printable(value[start:end], lines=lines)}]]")
            position = end
        text.append(printable(value[position:], lines=lines))
        return text

    def line(self, label: str, value: str, path: str, indent: int = 2) -> None:
        text = Text(" " * indent + printable(label, lines=False) + " ")
        text.append_text(self.marked(value, path, lines=False))
        out.print(text)

    def block(self, value: str, path: str, indent: int = 6) -> None:
        for part in self.marked(value, path).split("\n"):
            out.print(Text(" " * indent).append_text(part))


def render(view: CandidateView, *, terminal: bool) -> None:
    show = _Renderer(view.findings, terminal=terminal)
    _render_header(view)
    say_line("")
    _render_payload(view.payload, show)
    _render_terms(view.payload)
    _render_family(view)
    _render_near(view)
    _render_evidence(view.evidence, show)


def _render_header(view: CandidateView) -> None:
    row = view.candidate
    state = _("waiting for review") if row.adjudication else _("not sent to review")
    reasons = f" ({', '.join(review_reason(reason) for reason in row.review_reasons)})" if row.review_reasons else ""
    say_line(
        _("candidate {id}: {state}, {review}{reasons}").format(
            id=row.candidate_id, state=row.state, review=state, reasons=reasons
        )
    )
    say_line(_("  scope      {tenant}/{workspace}").format(tenant=row.scope.tenant, workspace=row.scope.workspace))
    say_line(
        _("  captured   {at} by {principal}, agent {agent}, session {session}, trust {trust}").format(
            at=when(row.captured_at_ms),
            principal=row.actor.principal,
            agent=row.actor.agent_id,
            session=row.actor.session,
            trust=row.trust_class,
        )
    )
    attested = _("yes") if row.has_attestation else _("no")
    say_line(
        _("  size       {size} bytes, {count} citation(s), attestation {attested}").format(
            size=number(row.size_bytes), count=row.citation_count, attested=attested
        )
    )
    say_line(
        _("  at capture the policy's detector saw: {categories}").format(
            categories=", ".join(row.secret_categories) or _("nothing")
        )
    )
    findings = _("  secret findings now (every category, personal data included): {count}")
    say_line(findings.format(count=len(view.findings) if view.findings else _("none")))
    for finding in view.findings:
        say_line(
            _("    {category} at {path} [{start}:{end}]").format(
                category=finding.category, path=finding.path, start=finding.start, end=finding.end
            )
        )


def _render_payload(payload: Mapping[str, Any], show: _Renderer) -> None:
    show.line(_("purpose"), payload["purpose_ref"], "payload/purpose_ref", 0)
    valid = payload["valid_time"]
    until = when(valid["t_end"]) if "t_end" in valid else _("open")
    say_line(_("valid      {since} .. {until}").format(since=when(valid["t"]), until=until))
    event = payload["primary_event"]
    show.line(_("primary event"), event["type_ref"], "payload/primary_event/type_ref", 0)
    say_line(_("  at {at}, cites {citation}").format(at=when(event["at"]), citation=event["citation_id"]))

    say_line("")
    say_line(_("components"))
    for index, component in enumerate(payload["components"]):
        primary = _(", primary") if component["component_id"] == payload["primary_component_id"] else ""
        base = f"payload/components/{index}"
        show.line("-", component["component_id"], f"{base}/component_id")
        say_line(
            _("    {kind}{primary}; cites {citations}").format(
                kind=component["kind"], primary=primary, citations=", ".join(component["citation_ids"])
            )
        )
        show.block(component["text"], f"{base}/text")
    say_line(_("citations"))
    for index, citation in enumerate(payload["citations"]):
        base = f"payload/citations/{index}"
        show.line("-", citation["citation_id"], f"{base}/citation_id")
        show.line(_("source"), citation["source_ref"], f"{base}/source_ref", 4)
        locator = citation["locator"]
        show.line(
            _("locator ({scheme})").format(scheme=locator["scheme"]), locator["value"], f"{base}/locator/value", 4
        )
        say_line(_("    content {digest}").format(digest=citation["content_digest"]))
        if "observed_at" in citation:
            say_line(_("    observed {at}").format(at=citation["observed_at"]))


def _render_evidence(evidence: Mapping[str, Any], show: _Renderer) -> None:
    say_line(_("evidence"))
    show.line(_("ref"), evidence["evidence_ref"], "evidence/evidence_ref")
    say_line(
        _("  digest {digest}; cites {citations}").format(
            digest=evidence["evidence_digest"], citations=", ".join(evidence["citation_ids"])
        )
    )
    if "attestation" in evidence:
        say_line(_("  attestation"))
        show.block(evidence["attestation"], "evidence/attestation", 4)


def _render_terms(payload: Mapping[str, Any]) -> None:
    retention = payload["retention"]
    expiry = _(", expires {at}").format(at=retention["expires_at"]) if "expires_at" in retention else ""
    say_line(_("retention  {rule}{expiry}").format(rule=retention["derivative_rule"], expiry=expiry))
    families = payload["reconciliation"]["family_refs"]
    say_line(_("reconciliation families: {families}").format(families=", ".join(families) or _("none")))


def _beside(title: str, rows: list[tuple[Text, Text]]) -> None:
    """The candidate beside each current record a person weighs it against, in two columns."""
    if not rows:
        return
    say_line("")
    say_line(title)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column(_("this candidate"), overflow="fold", ratio=1)
    table.add_column(_("current record"), overflow="fold", ratio=1)
    for row in rows:
        table.add_row(*row)
    out.print(table)


def _similarity(lexical: float, semantic: float | None) -> str:
    if semantic is None:
        return _("similarity {lexical}").format(lexical=f"{lexical:.2f}")
    return _("similarity {lexical}, embeddings {semantic}").format(lexical=f"{lexical:.2f}", semantic=f"{semantic:.2f}")


def _render_near(view: CandidateView) -> None:
    mine = Text(printable(primary_text(view.payload)))
    rows = [
        (
            mine,
            Text(inline(f"{m.record_id} ({_similarity(m.similarity, m.semantic)})") + "\n")
            + Text(printable(primary_text(m.payload))),
        )
        for m in view.near_matches
    ]
    _beside(_("near-identical current memories (review accept keeps both; or reject)"), rows)


def _render_family(view: CandidateView) -> None:
    valid_from = _("valid from {at}")
    mine = Text(valid_from.format(at=when(view.payload["valid_time"]["t"])) + "\n") + Text(
        printable(primary_text(view.payload))
    )
    rows = []
    for member in view.family_members:
        fate = _("superseded if accepted") if member.superseded_on_accept else _("kept unless --supersede")
        head = f"{member.record_id} ({member.family_ref}: {member.mode}; {fate})"
        other = Text(inline(head) + "\n" + valid_from.format(at=when(member.valid_from_ms)) + "\n")
        rows.append((mine, other + Text(printable(primary_text(member.payload)))))
    _beside(_("current memories of the same families (review accept --supersede | --keep-both, or reject)"), rows)
