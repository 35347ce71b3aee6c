"""CLI commands of the memory lifecycle: compact, forget, session end, merges, migrations.

Registered onto the main group by ``cli``; destructive commands preview by default or
have ``--dry-run``, and every one prints what it did (``--json`` for machines).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

__all__ = ["register"]


def register(
    main: click.Group,
    schema: click.Group,
    db: click.Group,
    app_of: Callable[[click.Context], Any],
    out: Callable[[Any, bool, str], None],
    friendly: Callable[[Any], Any],
    warm_of: Callable[[click.Context], Any] = lambda ctx: None,
) -> None:
    """``warm_of``: the running server holding the memory, if any; every command here then
    asks it (same results, same errors) instead of opening the file."""

    @main.command()
    @click.option("--entity-type", default=None, help="Only this entity type.")
    @click.option("--min-records", type=int, default=None, help="Threshold (default: retention.compact_after).")
    @click.option("--session", default=None, help="Only this session.")
    @click.option("--dry-run", is_flag=True, help="Show what would be summarised; write nothing.")
    @click.option("--no-model", is_flag=True, help="Facts-only summaries (no model-written sentence).")
    @click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
    @click.pass_context
    @friendly
    def compact(
        ctx: click.Context,
        entity_type: str | None,
        min_records: int | None,
        session: str | None,
        dry_run: bool,
        no_model: bool,
        as_json: bool,
    ) -> None:
        """Summarise entities with many memories into one summary record each (originals kept, linked)."""
        if (warm := warm_of(ctx)) is not None:
            body = {
                "entity_type": entity_type,
                "min_records": min_records,
                "session_id": session,
                "dry_run": dry_run,
                "use_model": not no_model,
            }
            rows = warm.call("POST", "/compact", body)
        else:
            from .progress import bars

            with bars() as report:
                rows = app_of(ctx).compact(
                    entity_type, min_records, session, dry_run=dry_run, use_model=not no_model, progress=report
                )
        lines = [
            f"{'would summarise' if dry_run else 'summarised'} {r['entity_type']} {r['entity_id']} "
            f"({r['records']} memories){'' if dry_run else ': ' + r['summary'].replace(chr(10), ' / ')}"
            for r in rows
        ]
        out(rows, as_json, "\n".join(lines) or "nothing to compact")

    @main.command()
    @click.option("--apply", "apply_", is_flag=True, help="Delete what the policies select (default: dry run).")
    @click.option("--session", default=None, help="Only this session.")
    @click.option("--json", "as_json", is_flag=True, help="Print the decisions as JSON.")
    @click.pass_context
    @friendly
    def forget(ctx: click.Context, apply_: bool, session: str | None, as_json: bool) -> None:
        """Show (or with --apply, delete) the records the schema's retention policies select."""
        if (warm := warm_of(ctx)) is not None:
            decisions = warm.call("POST", "/forget", {"apply": apply_, "session_id": session})
        else:
            decisions = [d.__dict__ for d in app_of(ctx).forget(dry_run=not apply_, session_id=session)]
        verb = "forgot" if apply_ else "would forget"
        lines = [
            f"{verb} {d['memory_id'][:8]} {d['event_type']} {d['entity_type']} {d['entity_id']}: "
            f"{d['reason']} [{d['policy']}]"
            for d in decisions
        ]
        out(decisions, as_json, "\n".join(lines) or "no policy selects any record")

    @main.group()
    def session() -> None:
        """Sessions: end one (applies forget_on_session_end policies)."""

    @session.command("end")
    @click.argument("session_id")
    @click.option("--dry-run", is_flag=True, help="Show what ending it would forget.")
    @click.option("--json", "as_json", is_flag=True, help="Print the decisions as JSON.")
    @click.pass_context
    @friendly
    def session_end(ctx: click.Context, session_id: str, dry_run: bool, as_json: bool) -> None:
        """End SESSION_ID and apply the retention policies to it."""
        if (warm := warm_of(ctx)) is not None:
            path = f"/sessions/{urllib.parse.quote(session_id, safe='')}/end?dry_run={str(dry_run).lower()}"
            decisions = warm.call("POST", path)
        else:
            decisions = [d.__dict__ for d in app_of(ctx).end_session(session_id, dry_run=dry_run)]
        lines = [f"{'would forget' if dry_run else 'forgot'} {d['memory_id'][:8]}: {d['reason']}" for d in decisions]
        out(
            decisions,
            as_json,
            "\n".join(lines) or f"session {session_id} ended; nothing forgotten",
        )

    @db.command("merges")
    @click.option("--session", default=None, help="Only this session.")
    @click.option("--json", "as_json", is_flag=True, help="Print the merges as JSON.")
    @click.pass_context
    @friendly
    def db_merges(ctx: click.Context, session: str | None, as_json: bool) -> None:
        """List entity merges and corrections (which id became which, by which rule)."""
        if (warm := warm_of(ctx)) is not None:
            query = f"?session_id={urllib.parse.quote(session, safe='')}" if session else ""
            rows = warm.call("GET", "/merges" + query)
        else:
            rows = app_of(ctx).list_merges(session)
        lines = [
            f"{str(r['ts'])[:16].replace('T', ' ')} {r['entity_type']} {r['from_id']} → {r['to_id']} ({r['rule']})"
            for r in rows
        ]
        out(rows, as_json, "\n".join(lines) or "no merges")

    @schema.command("migrate")
    @click.argument("new_schema")
    @click.option("--spec", "spec_file", type=click.Path(exists=True, dir_okay=False), help="Renames/drops (JSON).")
    @click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
    @click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
    @click.pass_context
    @friendly
    def schema_migrate(
        ctx: click.Context, new_schema: str, spec_file: str | None, dry_run: bool, as_json: bool
    ) -> None:
        """Migrate stored records to NEW_SCHEMA (reversible with `schema revert`)."""
        from ...api import resolve_schema
        from ...config import Settings

        target = resolve_schema(new_schema, Settings.from_env().schema_dir)
        spec = json.loads(Path(spec_file).read_text(encoding="utf-8")) if spec_file else {}
        warm = warm_of(ctx)
        if dry_run:
            if warm is not None:
                body = {"schema": target.to_json_dict(), "spec": spec, "dry_run": True}
                summary = warm.call("POST", "/schema/migrate", body)
            else:
                summary = app_of(ctx).plan_migration(target, spec).summary()
            text = f"would change {summary['records_changed']} records, {summary['entities_changed']} entities"
            if summary["problems"]:
                text += "; refused because:\n  " + "\n  ".join(summary["problems"])
            out(summary, as_json, text)
            return
        if warm is not None:
            done = warm.call(
                "POST", "/schema/migrate", {"schema": target.to_json_dict(), "spec": spec, "dry_run": False}
            )
        else:
            done = app_of(ctx).migrate(target, spec)
        out(
            done, as_json, f"migration {done['migration_id']}: {done['records']} records now at {target.schema_version}"
        )

    @schema.command("revert")
    @click.argument("migration_id")
    @click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
    @click.pass_context
    @friendly
    def schema_revert(ctx: click.Context, migration_id: str, as_json: bool) -> None:
        """Undo a migration: every changed row is restored exactly."""
        if (warm := warm_of(ctx)) is not None:
            done = warm.call("POST", f"/schema/migrations/{urllib.parse.quote(migration_id, safe='')}/revert")
        else:
            done = app_of(ctx).revert_migration(migration_id)
        out(done, as_json, f"reverted {migration_id}: {done['records']} records back at {done['schema_version']}")

    @schema.command("migrations")
    @click.option("--json", "as_json", is_flag=True, help="Print the migrations as JSON.")
    @click.pass_context
    @friendly
    def schema_migrations(ctx: click.Context, as_json: bool) -> None:
        """List applied migrations (and whether they were reverted)."""
        warm = warm_of(ctx)
        rows = warm.call("GET", "/schema/migrations") if warm is not None else app_of(ctx).list_migrations()
        lines = [
            f"{r['migration_id']} {r['spec']['from_version']} → {r['spec']['to_version']} "
            f"{r['records']} records{' (reverted)' if r['reverted_at'] else ''}"
            for r in rows
        ]
        out([{k: v for k, v in r.items() if k != "spec"} for r in rows], as_json, "\n".join(lines) or "no migrations")
