"""The panel's Lifecycle tab: merges, compaction, forgetting (dry run first), migrations.

Handlers are plain functions of the ``Appliance`` (tested without a browser); the tab only
wires them to buttons and tables.
"""

from __future__ import annotations

from typing import Any

from ...api import Appliance
from ...errors import ApplianceError

__all__ = [
    "merges_table",
    "compact_preview",
    "compact_run",
    "forget_table",
    "migrations_table",
    "undo_migration",
    "lifecycle_tab",
]


def merges_table(app: Appliance, session: str = "") -> list[list[Any]]:
    return [
        [f"{m['ts']:%Y-%m-%d %H:%M}", m["session_id"], m["entity_type"], m["from_id"], m["to_id"], m["rule"]]
        for m in app.list_merges(session or None)
    ]


def compact_preview(app: Appliance, min_records: float | None) -> list[list[Any]]:
    try:
        rows = app.compact(min_records=int(min_records) if min_records else None, dry_run=True)
    except ApplianceError as exc:
        return [["", "", "", exc.message]]
    return [[r["session_id"], r["entity_type"], r["entity_id"], r["records"]] for r in rows]


def compact_run(app: Appliance, min_records: float | None) -> str:
    try:
        rows = app.compact(min_records=int(min_records) if min_records else None)
    except ApplianceError as exc:
        return f"**Error:** {exc.message}"
    if not rows:
        return "Nothing to compact."
    return "\n".join(f"- **{r['entity_type']} {r['entity_id']}** ({r['records']}): {r['summary']}" for r in rows)


def forget_table(app: Appliance, apply: bool = False) -> list[list[Any]]:
    decisions = app.forget(dry_run=not apply)
    return [
        [
            "forgotten" if apply else "would forget",
            d.memory_id[:8],
            f"{d.recorded_at:%Y-%m-%d}",
            d.event_type,
            f"{d.entity_type} {d.entity_id}",
            d.reason,
            d.policy,
        ]
        for d in decisions
    ]


def migrations_table(app: Appliance) -> list[list[Any]]:
    return [
        [
            m["migration_id"],
            m["spec"]["from_version"],
            m["spec"]["to_version"],
            m["records"],
            "reverted" if m["reverted_at"] else "applied",
        ]
        for m in app.list_migrations()
    ]


def undo_migration(app: Appliance, migration_id: str = "") -> tuple[str, list[list[Any]]]:
    """Revert the migration ``migration_id`` (blank: the newest one still applied, the schema
    edit the Apply button made last): what was done, and the migrations table after it."""
    wanted = (migration_id or "").strip()
    if not wanted:
        applied = [m for m in app.list_migrations() if not m["reverted_at"]]
        if not applied:
            return "No applied migration to undo.", migrations_table(app)
        wanted = max(applied, key=lambda m: m["applied_at"])["migration_id"]
    try:
        done = app.revert_migration(wanted)
    except ApplianceError as exc:
        return f"**Not undone:** {exc}", migrations_table(app)
    return (
        f"Migration {wanted} undone: {done['records']} records restored; the memory is back at "
        f"{app.schema.domain} {done['schema_version']}.",
        migrations_table(app),
    )


def lifecycle_tab(app: Appliance) -> None:
    """Build the tab inside the caller's ``gr.Blocks``."""
    import gradio as gr

    with gr.Tab("Lifecycle"):
        gr.Markdown("Merges and corrections follow the schema's `resolution` rules; each one is listed here.")
        merges_btn = gr.Button("Show merges")
        merges = gr.Dataframe(headers=["time", "session", "type", "from", "to", "rule"], label="Entity merges")
        merges_btn.click(lambda: merges_table(app), None, merges)
        with gr.Row():
            min_records = gr.Number(value=None, label="Compact entities with at least N memories (blank: schema)")
            preview = gr.Button("Preview compaction")
            run = gr.Button("Compact", variant="primary")
        plan = gr.Dataframe(headers=["session", "type", "id", "memories"], label="Would be summarised")
        done = gr.Markdown("")
        preview.click(lambda n: compact_preview(app, n), min_records, plan)
        run.click(lambda n: compact_run(app, n), min_records, done)
        with gr.Row():
            dry = gr.Button("Forgetting: dry run")
            apply = gr.Button("Apply forgetting policies", variant="stop")
        headers = ["action", "memory", "recorded", "event", "entity", "reason", "policy"]
        forgotten = gr.Dataframe(headers=headers, label="Retention policies")
        dry.click(lambda: forget_table(app), None, forgotten)
        apply.click(lambda: forget_table(app, apply=True), None, forgotten)
        mig_btn = gr.Button("Show schema migrations")
        migs = gr.Dataframe(headers=["id", "from", "to", "records", "status"], label="Migrations")
        mig_btn.click(lambda: migrations_table(app), None, migs)
        with gr.Row():
            undo_id = gr.Textbox(label="Migration to undo (blank: the last one applied)", elem_id="undo-id")
            undo = gr.Button("Undo migration", variant="stop", elem_id="undo-migration")
        undone = gr.Markdown("")
        undo.click(lambda mid: undo_migration(app, mid), undo_id, [undone, migs])
