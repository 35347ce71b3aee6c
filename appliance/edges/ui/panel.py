"""The Gradio panel: a view over ``Appliance``. Handlers are plain functions (tested without a
browser); ``build_ui`` only wires them. Offline: analytics off, system fonts only (the
default theme would fetch Google Fonts), no share link, no SSR node server."""

from __future__ import annotations

import difflib
import json
import os
import queue
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...api import Appliance
from ...domain.loading import parse_schema, schema_problems
from ...errors import ApplianceError
from ..access import AccessPolicy
from .drawing import SEP, graph_svg, timeline_svg
from .lifecycle import lifecycle_tab

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

__all__ = [
    "build_ui",
    "launch",
    "panel_asgi",
    "is_question",
    "chat_turn",
    "chat_stream",
    "records_table",
    "validate_schema_text",
    "graph_text",
    "schema_diff",
    "suggestions_table",
]

RECORD_COLUMNS = [
    "memory_id",
    "time",
    "session",
    "status",
    "confidence",
    "event_type",
    "entity",
    "state",
    "attributes",
    "text",
]


def is_question(app: Appliance, text: str) -> bool:
    """Chat routing: questions and lookups ("show …", "list …") are recalled, statements
    recorded (the running schema's language packs decide)."""
    return app.schema.language.is_lookup(text)


def chat_stream(
    app: Appliance, message: str, history: list[dict[str, str]], session: str, mode: str
) -> Iterator[tuple[list[dict[str, str]], str, str]]:
    """One chat turn, streamed: the record JSON is shown while the model writes it."""
    history = list(history or [])
    if not message or not message.strip():
        yield history, "", "type a message first"
        return
    history.append({"role": "user", "content": message})
    route = mode if mode in ("record", "recall") else ("recall" if is_question(app, message) else "record")
    if route == "recall":
        yield history + [{"role": "assistant", "content": "…searching memory"}], "", "… recalling…"
        yield _recall_turn(app, message, history, session)
        return
    progress: queue.Queue[str] = queue.Queue()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["record"] = app.record(message, session_id=session or "default", on_progress=progress.put)
        except ApplianceError as exc:
            outcome["error"] = exc
        finally:
            progress.put(_DONE)

    threading.Thread(target=work, daemon=True).start()
    partial = ""
    while (piece := progress.get()) is not _DONE:
        partial = piece
        yield history + [{"role": "assistant", "content": "…writing the record"}], partial, "… extracting…"
    if "error" in outcome:
        exc = outcome["error"]
        history.append({"role": "assistant", "content": f"Error: {exc.message} (hint: {exc.hint})"})
        yield history, json.dumps({"error": exc.message}), "record failed"
        return
    rec = outcome["record"]
    flag = " (needs review!)" if rec.status == "needs_review" else ""
    history.append(
        {
            "role": "assistant",
            "content": f"Recorded ({rec.status}, confidence {rec.confidence:.2f}){flag}: {rec.summary()}",
        }
    )
    yield history, json.dumps({"record": rec.model_dump(mode="json")}, ensure_ascii=False, indent=1), "record done"


_DONE = "\x00done"


def _recall_turn(
    app: Appliance, message: str, history: list[dict[str, str]], session: str
) -> tuple[list[dict[str, str]], str, str]:
    try:
        res = app.recall(message, session_id=session or "default")
    except ApplianceError as exc:
        history.append({"role": "assistant", "content": f"Error: {exc.message} (hint: {exc.hint})"})
        return history, json.dumps({"error": exc.message}), "recall failed"
    found: list[dict[str, Any]] = [
        {
            "memory_id": r.memory.memory_id,
            "paths": r.paths,
            "score": round(r.score, 4),
            "text": r.memory.source_text[:120],
        }
        for r in res.memories
    ]
    details = {
        "query": res.query.model_dump(mode="json"),
        "sql": res.sql,
        "params": [str(p) for p in res.params],
        "hits": len(res.hits),
        "memories": found or "none",
        "not_found": res.not_found,
    }
    history.append({"role": "assistant", "content": res.context})
    return history, json.dumps(details, ensure_ascii=False, indent=1), "recall done"


def chat_turn(
    app: Appliance, message: str, history: list[dict[str, str]], session: str, mode: str
) -> tuple[list[dict[str, str]], str, str]:
    """One chat turn without streaming → (history, details JSON, status line)."""
    steps = list(chat_stream(app, message, history, session, mode))
    return steps[-1] if steps else (list(history or []), "", "")


def graph_text(app: Appliance, session: str, entity: str) -> str:
    """'Order 4567' → an indented relationship tree, as a code block."""
    parts = entity.strip().split(maxsplit=1)
    if len(parts) != 2:
        return "Enter an entity as `Type id`, e.g. `Order 4567`."
    lines = app.entity_graph(session or "default", parts[0], parts[1])
    return "```\n" + "\n".join(lines) + "\n```"


def schema_diff(app: Appliance, text: str) -> str:
    """Unified diff of the editor against the running schema."""
    try:
        edited = json.dumps(json.loads(text), ensure_ascii=False, indent=2, sort_keys=True).splitlines()
    except json.JSONDecodeError:
        return "(the editor does not hold valid JSON)"
    running = json.dumps(app.schema.to_json_dict(), ensure_ascii=False, indent=2, sort_keys=True).splitlines()
    diff = list(difflib.unified_diff(running, edited, "running", "editor", lineterm="", n=1))
    if not diff:
        return "No changes against the running schema."
    return "```diff\n" + "\n".join(diff) + "\n```\n\n" + _apply_preview(app, text)


def _apply_preview(app: Appliance, text: str) -> str:
    """What Apply would do to the stored records (the migration's dry run)."""
    try:
        new = parse_schema(json.loads(text))
        if new.domain != app.schema.domain:
            return f"Apply loads {new.domain} beside the running schema; stored records keep theirs."
        s = app.plan_migration(new, {}).summary()
    except ApplianceError as exc:
        return f"Apply is not possible: {exc.message}"
    if s["problems"]:
        return "Apply would be refused:\n" + "\n".join(f"- {p}" for p in s["problems"][:5])
    return f"Apply rewrites {s['records_changed']} records and {s['entities_changed']} entities (undoable)."


def suggestions_table(app: Appliance) -> list[list[Any]]:
    return [[s["entity"], s["attribute"], s["count"], "; ".join(s["examples"])] for s in app.schema_suggestions()]


def import_file(app: Appliance, path: str | None, uploads: Path) -> str:
    """Import a file the person uploaded: only from ``uploads`` (Gradio's upload folder). A
    caller of the panel's API can name any path on the server in place of an upload; the
    panel reads none of them."""
    if not path:
        return "Choose a JSONL or Parquet file exported by the appliance."
    if not Path(path).resolve().is_relative_to(uploads.resolve()):
        return "Error: only a file uploaded here can be imported."
    importer = app.import_parquet if str(path).endswith(".parquet") else app.import_jsonl
    try:
        n, problems = importer(Path(path))
    except ApplianceError as exc:
        return f"Error: {exc.message}"
    return f"Imported {n} records." + (f" {len(problems)} bad lines: {'; '.join(problems[:3])}" if problems else "")


def records_table(
    app: Appliance, search: str = "", session: str = "", status: str = "all", page: int = 1, page_size: int = 25
) -> list[list[Any]]:
    recs = app.list_records(
        session=session or None,
        search=search or "",
        limit=page_size,
        offset=max(0, int(page) - 1) * page_size,
        status=None if status in ("", "all") else status,
    )
    return [
        [
            r.memory_id,
            f"{r.timestamp:%Y-%m-%d %H:%M:%S}",
            r.session_id,
            r.status,
            round(r.confidence, 2),
            r.event_type or "",
            f"{r.entity_type or ''} {r.entity_id or ''}".strip(),
            r.state or "",
            json.dumps({k: v for k, v in r.attributes.items() if v is not None}, ensure_ascii=False),
            r.source_text,
        ]
        for r in recs
    ]


def entities_table(app: Appliance, session: str = "") -> list[list[Any]]:
    return [
        [e.type, e.id, e.state or "", json.dumps(e.attributes, ensure_ascii=False), e.version]
        for e in app.list_entities(session=session or None)
    ]


def relationships_table(app: Appliance, session: str = "") -> list[list[Any]]:
    return [
        [r.source_type, r.source_id, r.type, r.target_type, r.target_id]
        for r in app.list_relationships(session=session or None)
    ]


def edit_record(app: Appliance, memory_id: str, changes_json: str) -> str:
    try:
        changes = json.loads(changes_json or "{}")
        if not isinstance(changes, dict):
            return 'Error: changes must be a JSON object, e.g. {"state": "shipped"}'
        rec = app.edit_record(memory_id.strip(), changes)
        return f"Saved: {rec.summary()}"
    except json.JSONDecodeError as exc:
        return f"Error: changes are not JSON ({exc.msg})"
    except ApplianceError as exc:
        return f"Error: {exc.message}"


def delete_record(app: Appliance, memory_id: str) -> str:
    return "Deleted." if app.delete_record(memory_id.strip()) else f"Error: no memory {memory_id!r}"


def mark_reviewed(app: Appliance, memory_id: str) -> str:
    return edit_record(app, memory_id, '{"status": "reviewed"}')


def export_file(app: Appliance, fmt: str) -> str:
    path = Path(tempfile.mkdtemp()) / f"memories.{fmt}"
    if fmt == "parquet":
        app.export_parquet(path)
    else:
        app.export_jsonl(path)
    return str(path)


def validate_schema_text(text: str) -> str:
    """Inline validation message for the schema editor."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"✗ not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}"
    problems = schema_problems(raw)
    if not problems:
        try:
            parse_schema(raw)
        except ApplianceError as exc:
            problems = [exc.message]
    if problems:
        return "✗ invalid schema:\n" + "\n".join(f"- {p}" for p in problems)
    return "✓ valid schema"


def apply_schema(app: Appliance, text: str) -> str:
    """The editor's schema becomes the memory's, stored with it. An edit of the running
    schema is a migration of its records (refused if any would not fit; undoable); another
    domain joins the loaded schemas as the default, so the records already told keep theirs."""
    msg = validate_schema_text(text)
    if not msg.startswith("✓"):
        return msg
    try:
        new = parse_schema(json.loads(text))
        if new.schema_id == app.schema.schema_id:
            return f"✓ no change: {new.domain} ({new.schema_id}) is the running schema"
        if new.domain == app.schema.domain:
            planned = app.plan_migration(new, {})
            if planned.problems:
                return f"✗ refused: {len(planned.problems)} stored rows would not fit:\n" + "\n".join(
                    f"- {p}" for p in planned.problems[:5]
                )
            done = app.migrate(new, {})
            what = (
                f"migration {done['migration_id']}: {done['records']} records now at version {new.schema_version}; "
                f"undo it under Lifecycle → Undo migration (or `appliance schema revert {done['migration_id']}`)"
            )
        elif app.list_records(limit=1):
            app.add_schema(new, default=True)
            what = f"loaded beside {', '.join(d for d in app.schemas if d != new.domain)}; messages are routed"
        else:
            app.set_schema(new, force=True)
            what = "the memory holds no records yet"
    except ApplianceError as exc:
        return f"✗ {exc.message}"
    return f"✓ compiled {app.schema.domain} ({app.schema.schema_id}); {what}"


def current_schema_text(app: Appliance) -> str:
    return json.dumps(app.schema.to_json_dict(), ensure_ascii=False, indent=2)


def session_pictures(app: Appliance, session: str) -> tuple[str, str]:
    """The session's entity graph and record timeline as SVG."""
    session = (session or "default").strip()
    ents = app.list_entities(session=session, limit=60)
    rels = app.list_relationships(session=session, limit=500)
    recs = app.list_records(session=session, limit=80)
    return graph_svg(ents, rels), timeline_svg(recs)


def entity_memories_table(app: Appliance, session: str, evt: Any) -> tuple[str, list[list[Any]]]:
    """The memories of the entity a click on the graph named (``data-entity``)."""
    key = str(getattr(evt, "entity", "") or "")
    if SEP not in key:
        return "", []
    etype, eid = key.split(SEP, 1)
    rows = [
        [r.timestamp.strftime("%Y-%m-%d %H:%M"), r.event_type, r.state, r.summary(), r.memory_id]
        for r in app.entity_memories((session or "default").strip(), etype, eid)
    ]
    return f"**{etype} {eid}** — {len(rows)} memories", rows


def build_ui(app: Appliance) -> Any:
    import gradio as gr

    with gr.Blocks(analytics_enabled=False, title="Memory appliance") as ui:
        gr.Markdown("## Memory appliance — offline, schema-constrained memory")
        with gr.Tab("Chat"):
            with gr.Row():
                with gr.Column(scale=3):
                    chat = gr.Chatbot(label="Conversation", height=420)
                    msg = gr.Textbox(
                        label="Message", placeholder="Tell me something, or ask a question", elem_id="chat-input"
                    )
                    with gr.Row():
                        session = gr.Textbox(value="default", label="Session", scale=1)
                        mode = gr.Radio(["auto", "record", "recall"], value="auto", label="Mode", scale=2)
                        send = gr.Button("Send", variant="primary", elem_id="chat-send")
                with gr.Column(scale=2):
                    details = gr.Code(label="Record / query / SQL", language="json", elem_id="chat-details")
                    status = gr.Markdown("")
            send.click(
                lambda m, h, s, md: chat_turn(app, m, h, s, md), [msg, chat, session, mode], [chat, details, status]
            ).then(lambda: "", None, msg)
            msg.submit(
                lambda m, h, s, md: chat_turn(app, m, h, s, md), [msg, chat, session, mode], [chat, details, status]
            ).then(lambda: "", None, msg)
        with gr.Tab("Memories"):
            with gr.Row():
                search = gr.Textbox(label="Search", scale=3)
                sess_f = gr.Textbox(label="Session", scale=1)
                stat_f = gr.Dropdown(
                    ["all", "ok", "needs_review", "unparsed", "reviewed"], value="all", label="Status", scale=1
                )
                page = gr.Number(value=1, precision=0, minimum=1, label="Page", scale=1)
                refresh = gr.Button("Refresh", elem_id="mem-refresh")
            table = gr.Dataframe(headers=RECORD_COLUMNS, interactive=False, wrap=True, elem_id="mem-table")
            with gr.Row():
                mem_id = gr.Textbox(label="Memory id", scale=2)
                changes = gr.Textbox(label='Changes (JSON, e.g. {"state": "shipped"})', scale=3)
            with gr.Row():
                save = gr.Button("Save edit")
                reviewed = gr.Button("Mark reviewed")
                delete = gr.Button("Delete", variant="stop")
                fmt = gr.Radio(["jsonl", "parquet"], value="jsonl", label="Export format")
                export = gr.Button("Export")
            edit_msg = gr.Markdown("")
            export_out = gr.File(label="Export")
            with gr.Row():
                upload = gr.File(label="Import JSONL / Parquet", file_types=[".jsonl", ".parquet"], type="filepath")
                import_msg = gr.Markdown("")
            uploads = Path(gr.utils.get_upload_folder())
            upload.upload(lambda p: import_file(app, p, uploads), upload, import_msg, api_name="import_file")
            ents = gr.Dataframe(headers=["type", "id", "state", "attributes", "version"], label="Entities")
            rels = gr.Dataframe(headers=["from_type", "from_id", "type", "to_type", "to_id"], label="Relationships")
            with gr.Row():
                graph_for = gr.Textbox(
                    label="Graph for entity (Type id)", placeholder="Order 4567", elem_id="graph-for"
                )
                graph_btn = gr.Button("Show graph")
            graph = gr.Markdown("", elem_id="graph")
            graph_btn.click(lambda s, e: graph_text(app, s, e), [sess_f, graph_for], graph)
            load = [search, sess_f, stat_f, page]

            def refresh_all(q: str, s: str, st: str, p: float) -> tuple[Any, Any, Any]:
                return records_table(app, q, s, st, int(p or 1)), entities_table(app, s), relationships_table(app, s)

            refresh.click(refresh_all, load, [table, ents, rels])
            search.submit(refresh_all, load, [table, ents, rels])
            save.click(lambda i, c: edit_record(app, i, c), [mem_id, changes], edit_msg)
            reviewed.click(lambda i: mark_reviewed(app, i), mem_id, edit_msg)
            delete.click(lambda i: delete_record(app, i), mem_id, edit_msg)
            export.click(lambda f: export_file(app, f), fmt, export_out)
        with gr.Tab("Schema"):
            shipped = sorted(p.stem for p in app.settings.schema_dir.glob("*.json"))
            pick = gr.Dropdown(
                shipped, value=app.schema.domain if app.schema.domain in shipped else None, label="Shipped schemas"
            )
            editor = gr.Code(
                value=current_schema_text(app),
                language="json",
                label="Schema JSON",
                lines=18,
                max_lines=28,
                elem_id="schema-editor",
                interactive=True,
            )
            with gr.Row():
                validate = gr.Button("Validate", elem_id="schema-validate")
                compile_btn = gr.Button("Apply & recompile", variant="primary", elem_id="schema-compile")
            verdict = gr.Markdown("", elem_id="schema-verdict")
            diff_btn = gr.Button("Diff against running schema")
            diff = gr.Markdown("")
            diff_btn.click(lambda t: schema_diff(app, t), editor, diff)
            sugg_btn = gr.Button("Schema suggestions")
            sugg = gr.Dataframe(
                headers=["entity", "attribute", "count", "examples"],
                label="Attributes seen in records but not in the schema",
            )
            sugg_btn.click(lambda: suggestions_table(app), None, sugg)
            validate.click(validate_schema_text, editor, verdict)
            editor.change(validate_schema_text, editor, verdict)
            compile_btn.click(lambda t: apply_schema(app, t), editor, verdict)
            pick.change(lambda n: (app.settings.schema_dir / f"{n}.json").read_text() if n else "", pick, editor)
        with gr.Tab("Graph & timeline"):
            with gr.Row():
                pic_session = gr.Textbox(value="default", label="Session", scale=3, elem_id="pic-session")
                draw = gr.Button("Draw", variant="primary", elem_id="pic-draw")
            picture = gr.HTML(
                "",
                elem_id="entity-graph",
                js_on_load=(
                    "element.addEventListener('click', (e) => { const n = e.target.closest('[data-entity]');"
                    " if (n) { trigger('click', {entity: n.dataset.entity}); } });"
                ),
            )
            picked = gr.Markdown("", elem_id="entity-picked")
            picked_memories = gr.Dataframe(
                headers=["time", "event", "state", "summary", "memory id"],
                label="Memories of the clicked entity",
                elem_id="entity-memories",
                wrap=True,
            )
            timeline = gr.HTML("", elem_id="timeline", js_on_load=None)
            draw.click(lambda s: session_pictures(app, s), pic_session, [picture, timeline])

            def on_pick(s: str, evt: Any) -> tuple[str, list[list[Any]]]:
                return entity_memories_table(app, s, evt)

            on_pick.__annotations__["evt"] = gr.EventData  # Gradio passes the click's data by this type
            picture.click(on_pick, pic_session, [picked, picked_memories])
        lifecycle_tab(app)
    return ui


def _theme() -> Any:
    import gradio as gr

    return gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])


def launch(
    app: Appliance, host: str = "127.0.0.1", port: int = 7860, auth: tuple[str, str] | None = None, block: bool = True
) -> Any:
    """Gradio's own server, for use inside a Python process (notebooks, tests); the command
    ``appliance serve`` runs ``panel_asgi`` behind the Host guard with a graceful stop."""
    ui = build_ui(app)
    ui.launch(
        server_name=host,
        server_port=port,
        share=False,
        auth=panel_login(app, auth),
        theme=_theme(),
        ssr_mode=False,
        prevent_thread_lock=not block,
        footer_links=[],
        show_error=False,
    )
    return ui


def panel_login(app: Appliance, auth: tuple[str, str] | None) -> Any:
    """The panel's login: ``auth`` when given; else, when the appliance has API keys
    (``APPLIANCE_TOKEN`` / ``APPLIANCE_KEYS_FILE``), an admin key's token as the password — the
    panel shows every session, so a configured key must not be bypassed through it."""
    if auth is not None:
        return auth
    policy = AccessPolicy.from_settings(app.settings)
    return None if policy.open else policy.admin_login


def panel_asgi(app: Appliance, auth: tuple[str, str] | None = None, root: Any = None) -> Any:
    """The panel as an ASGI application (Gradio mounted at ``/`` on ``root``, a FastAPI
    application whose own routes go first; a new empty one when not given)."""
    import gradio as gr
    from fastapi import FastAPI

    root = root if root is not None else FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    ui = build_ui(app)
    mounted = gr.mount_gradio_app(
        root,
        ui,
        path="",
        auth=panel_login(app, auth),
        theme=_theme(),
        ssr_mode=False,
        footer_links=[],
        show_error=False,
    )
    # Gradio checks that a file a request names was uploaded (not any path on the server) only
    # for Blocks it launched itself; mounted ones skip the check unless marked launched
    ui.has_launched = True
    return mounted
