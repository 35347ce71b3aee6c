"""Command line: a thin edge over ``Appliance``; errors become one clear line, never a trace."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from ...config import Settings, database_target
from ...errors import ApplianceError
from .progress import bars, spinner

F = TypeVar("F", bound=Callable[..., Any])

# The demo's messages are data (a customer-service conversation in Chinese and English).
_DEMO = json.loads((Path(__file__).parent / "demo.json").read_text(encoding="utf-8"))
DEMO_MESSAGES: list[str] = _DEMO["messages"]
DEMO_QUESTIONS: list[str] = _DEMO["questions"]


def error_code(exc: ApplianceError) -> str:
    """A stable name of the kind of error ("input", "not_found", "store_locked")."""
    name = type(exc).__name__.removesuffix("Error") or "appliance"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _friendly(fn: F) -> F:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ApplianceError as exc:
            if kwargs.get("as_json"):  # a script reading --json output reads errors the same way
                click.echo(json.dumps({"error": exc.message, "hint": exc.hint, "code": error_code(exc)}))
                raise SystemExit(1) from None
            raise click.ClickException(f"{exc.message}\n  hint: {exc.hint}" if exc.hint else exc.message) from None

    return wrapper  # type: ignore[return-value]


def _db_target(o: dict[str, Any], settings: Settings) -> Path | str:
    """The memory the command opens: ``--db`` (a file or a URL), else ``$APPLIANCE_DB``."""
    return database_target(o["db"]) if o["db"] else settings.db_path


def _app(ctx: click.Context) -> Any:
    from ...api import Appliance
    from ...errors import StoreLockedError
    from ..client import server_of

    o = ctx.obj
    if "app" not in o:
        try:
            o["app"] = Appliance(schema=o["schema"], db=o["db"], model=o["model"], create=o.get("create", True))
        except StoreLockedError:
            target = _db_target(o, Settings.from_env())
            holder = server_of(target) if isinstance(target, Path) else None
            if holder is None:
                raise
            raise StoreLockedError(
                f"this memory is held by `appliance {holder['kind']}` (pid {holder['pid']}) at {holder['url']}",
                hint="stop it first, or use it: every command but import and restore goes to it by itself, "
                "and an agent connects to its /mcp",
            ) from None
        ctx.call_on_close(o["app"].close)
    return o["app"]


def _loaded(app: Any) -> Any:
    """``app`` with its model loaded, a spinner on the terminal meanwhile (7–10 s)."""
    with spinner("loading the model…"):
        app.engine  # noqa: B018 - the property loads it
    return app


def _warm(ctx: click.Context) -> Any:
    """The running server that holds this database (``appliance http``), if any: the command
    then talks to it instead of loading the model or failing on the database lock."""
    from ..client import find_server

    o = ctx.obj
    if "warm" not in o:
        settings = Settings.from_env()
        target = _db_target(o, settings)
        # a file has one writer: a server holding it serves the command; a PostgreSQL memory
        # is opened by every process itself
        o["warm"] = find_server(target, settings.token) if isinstance(target, Path) else None
        if o["warm"] is not None and o["schema"]:
            _same_schemas(o["warm"], o["schema"], settings)
    return o["warm"]


def _same_schemas(server: Any, named: list[str], settings: Settings) -> None:
    """``--schema`` given while a server holds the memory: the server reads it with the
    memory's schemas, so naming others is the same error as opening the file with them."""
    from ...api import resolve_schema
    from ...errors import SchemaMismatchError

    given = {resolve_schema(x, settings.schema_dir).schema_id: x for x in named}
    held = server.call("GET", "/schema")["loaded"]
    if set(given) != set(held.values()):
        raise SchemaMismatchError(
            f"this memory (served by {server.url}) holds {', '.join(f'{d!r} (id {i})' for d, i in held.items())} "
            f"but the command names {', '.join(f'{n!r} (id {i})' for i, n in given.items())}",
            hint="leave out --schema, or migrate the memory with `appliance schema migrate FILE`",
        )


def _json_arg(raw: str, name: str) -> Any:
    """A command-line value that must be JSON, or one clear error naming the option."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise click.ClickException(f"{name} is not JSON: {exc}") from None


def _out(data: Any, as_json: bool, text: str) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str) if as_json else text)


@click.group()
@click.option(
    "--schema",
    multiple=True,
    help="Shipped schema name or a schema file a new memory is created with (default: customer_service); "
    "repeat to load several (each utterance is routed to one). A memory keeps its schemas: later commands "
    "need no --schema, and naming others is an error (change them with `schema migrate`).",
)
@click.option(
    "--db",
    default=None,
    help="DuckDB file, or a postgresql:// URL shared by many processes (default: $APPLIANCE_DB).",
)
@click.option("--create", is_flag=True, help="Create the --db memory if it does not exist (otherwise an error).")
@click.option("--model", default=None, help="smollm2, gemma3-270m, or a .gguf path (default: $APPLIANCE_MODEL).")
@click.version_option(package_name="memory-appliance", prog_name="appliance")
@click.pass_context
def main(ctx: click.Context, schema: tuple[str, ...], db: str | None, create: bool, model: str | None) -> None:
    """Offline memory appliance: schema-constrained memory for LLM agents."""
    ctx.ensure_object(dict)
    ctx.obj.update(schema=list(schema) or None, db=db, model=model, create=create or db is None)


@main.command()
@click.argument("text")
@click.option("--session", default="default", show_default=True, help="Session the memory belongs to.")
@click.option("--use", "use", default=None, help="Domain of the loaded schema to use (default: chosen per utterance).")
@click.option(
    "--at", "at", default=None, help="When TEXT was said (ISO 8601; default: now). Relative dates read against it."
)
@click.option("--json", "as_json", is_flag=True, help="Print the stored record as JSON.")
@click.pass_context
@_friendly
def record(ctx: click.Context, text: str, session: str, use: str | None, at: str | None, as_json: bool) -> None:
    """Extract a memory record from TEXT and store it."""
    from ...domain.inputs import parse_moment
    from ...domain.records import MemoryRecord

    when = parse_moment(at, "--at")  # before the model loads: a bad time fails fast
    if (warm := _warm(ctx)) is not None:
        body = {"text": text, "session_id": session, "schema_name": use, "at": at}
        rec = MemoryRecord.model_validate(warm.call("POST", "/record", body))
    else:
        rec = _loaded(_app(ctx)).record(text, session_id=session, schema=use, now=when)
    _out(rec.model_dump(mode="json"), as_json, f"{rec.status} {rec.memory_id[:8]} {rec.summary()}")


@main.command()
@click.argument("question")
@click.option("--session", default="default", show_default=True, help="Session to read from.")
@click.option("--use", "use", default=None, help="Domain of the loaded schema to ask (default: chosen per question).")
@click.option(
    "--at", "at", default=None, help="When QUESTION is asked (ISO 8601; default: now): 'last week' reads from it."
)
@click.option("--json", "as_json", is_flag=True, help="Print query, SQL and hits as JSON.")
@click.pass_context
@_friendly
def recall(ctx: click.Context, question: str, session: str, use: str | None, at: str | None, as_json: bool) -> None:
    """Answer QUESTION from stored memories."""
    from ...domain.inputs import parse_moment
    from ...domain.records import RecallResult

    when = parse_moment(at, "--at")
    if (warm := _warm(ctx)) is not None:
        body = {"question": question, "session_id": session, "schema_name": use, "at": at}
        res = RecallResult.model_validate(warm.call("POST", "/recall", body))
    else:
        res = _loaded(_app(ctx)).recall(question, session_id=session, schema=use, now=when)
    _out(
        res.model_dump(mode="json"),
        as_json,
        f"query: {res.query.model_dump_json(exclude_defaults=True)}\n{res.context}",
    )


@main.command()
@click.argument("query_json")
@click.option("--session", default="default", show_default=True, help="Session to read from.")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@click.pass_context
@_friendly
def query(ctx: click.Context, query_json: str, session: str, as_json: bool) -> None:
    """Run a structured recall query given as JSON (no model involved)."""
    q = _json_arg(query_json, "QUERY_JSON")
    from ...domain.records import RecallResult

    if (warm := _warm(ctx)) is not None:
        res = RecallResult.model_validate(warm.call("POST", "/query", {"query": q, "session_id": session}))
    else:
        res = _app(ctx).query(q, session_id=session)
    _out(res.model_dump(mode="json"), as_json, f"sql: {res.sql}\nparams: {res.params}\n{res.context}")


@main.group()
def schema() -> None:
    """Validate and compile memory schemas."""


@schema.command("validate")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the problems as JSON.")
def schema_validate(file: str, as_json: bool) -> None:
    """Check FILE and list every problem, each naming its field."""
    from ...domain.loading import parse_schema, schema_problems

    raw = Path(file).read_bytes()
    try:
        data = json.loads(raw)
        problems = schema_problems(data)
        if not problems:
            parse_schema(data)
    except json.JSONDecodeError as exc:
        problems = [f"not valid JSON: {exc}"]
    except ApplianceError as exc:
        problems = [exc.message]
    _out(
        {"file": file, "valid": not problems, "problems": problems},
        as_json,
        "valid" if not problems else "invalid:\n" + "\n".join(f"  - {p}" for p in problems),
    )
    if problems:
        sys.exit(1)


@schema.command("import")
@click.argument("source")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "sgd", "jsonschema", "pydantic"]),
    default="auto",
    show_default=True,
    help="SGD service schema.json, a JSON Schema file, or a pydantic model given as module:Class "
    "(which imports, and so runs, that module).",
)
@click.option("--service", default=None, help="Only this service of an SGD schema file.")
@click.option("--language", "languages", multiple=True, help="Language pack(s) the schema speaks (en, zh).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write one <domain>.json per schema here (default: print them).",
)
@click.option("--force", is_flag=True, help="Overwrite existing files in --out.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@_friendly
def schema_import(
    source: str,
    fmt: str,
    service: str | None,
    languages: tuple[str, ...],
    out_dir: str | None,
    force: bool,
    as_json: bool,
) -> None:
    """Turn SOURCE (SGD / JSON Schema file, or module:Class) into memory schema(s), validated."""
    from ...domain.importers import import_schema
    from ...domain.loading import parse_schema

    dropped: list[str] = []
    schemas = import_schema(source, fmt=fmt, service=service, languages=languages, dropped=dropped)
    for data in schemas:
        parse_schema(data)  # an importer must never emit a schema the loader refuses
    for what in dropped:  # never silent about what did not come across
        click.echo(f"dropped {what}", err=True)
    if out_dir is None:
        click.echo(json.dumps(schemas if len(schemas) > 1 else schemas[0], ensure_ascii=False, indent=2))
        return
    target = Path(out_dir)
    target.mkdir(parents=True, exist_ok=True)
    paths = [target / f"{data['domain']}.json" for data in schemas]
    clashes = [str(p) for p in paths if p.exists()]
    if clashes and not force:
        raise click.ClickException(f"would overwrite {', '.join(clashes)}\n  hint: pass --force to replace them")
    for p, data in zip(paths, schemas, strict=True):
        p.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    _out(
        {"written": [str(p) for p in paths]},
        as_json,
        "\n".join(f"wrote {p}" for p in paths),
    )


@schema.command("new")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--domain", default=None, help="What the memory is about, one word (asked when missing).")
@click.option("--description", default=None, help="A sentence saying what is remembered.")
@click.option(
    "--entity",
    "entities",
    multiple=True,
    help="'Plant: name*, species, height (number), room (enum: kitchen | living room)'; * marks what "
    "it is known by (default: the first); kinds are guessed from names when not given. Repeatable.",
)
@click.option("--event", "events", multiple=True, help="'watered' or 'watered: Plant'. Repeatable.")
@click.option("--language", "languages", multiple=True, help="Language pack(s) the schema speaks (en, zh).")
@click.option("--force", is_flag=True, help="Overwrite FILE.")
@_friendly
def schema_new(
    file: str,
    domain: str | None,
    description: str | None,
    entities: tuple[str, ...],
    events: tuple[str, ...],
    languages: tuple[str, ...],
    force: bool,
) -> None:
    """Write a first schema to FILE from a few answers (asked for on a terminal, or given as
    options), validated; then edit its descriptions and `appliance --schema FILE --create …`."""
    from ...domain.loading import parse_schema
    from ...domain.scaffold import scaffold

    target = Path(file)
    if target.exists() and not force:
        raise click.ClickException(f"{file} exists\n  hint: pass --force to replace it")
    asking = not entities  # no --entity: ask for everything missing
    domain = domain or click.prompt("What is the memory about (one word, e.g. plants)")
    if description is None:
        description = click.prompt("In a sentence", default="") if asking else ""
    if asking:
        asked = []
        while spec := click.prompt("An entity and its attributes (Plant: name, species; empty: done)", default=""):
            asked.append(spec)
        entities = tuple(asked)
    if asking and not events:
        asked = []
        while spec := click.prompt("An event (watered: Plant; empty: done)", default=""):
            asked.append(spec)
        events = tuple(asked)
    data = scaffold(domain, description, list(entities), list(events), languages)
    parse_schema(data)
    target.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    click.echo(
        f"wrote {file}: {len(data['entities'])} entities, {len(data['event_types'])} events; rewrite the "
        "descriptions in your words (the extraction reads them), then `appliance schema validate` it"
    )


@schema.command("compile")
@click.argument("name_or_file", default="customer_service")
@click.option("--force", is_flag=True, help="Rebuild even if the cached grammar is current.")
@click.option(
    "--into",
    type=click.Path(file_okay=False),
    default=None,
    help="Compile into this directory (maintainers: the package's grammars/); default: the user cache.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_friendly
def schema_compile(name_or_file: str, force: bool, into: str | None, as_json: bool) -> None:
    """Compile a schema's record and query grammars (into $APPLIANCE_HOME/grammars unless the
    package already ships them)."""
    from ...api import resolve_schema
    from ...model.grammar import GrammarCache

    s = Settings.from_env()
    sch = resolve_schema(name_or_file, s.schema_dir)
    cache = GrammarCache(Path(into)) if into else GrammarCache(s.grammar_dir, shipped=s.shipped_grammar_dir)
    c = cache.compile(sch, force=force)
    info = {
        "schema_id": c.schema_id,
        "directory": str(c.directory),
        "from_cache": c.from_cache,
        "seconds": round(c.compile_seconds, 4),
        "record_regex_chars": len(c.record_regex),
        "query_regex_chars": len(c.query_regex),
    }
    _out(
        info,
        as_json,
        f"{sch.domain} {c.schema_id}: {'cached' if c.from_cache else 'compiled'} "
        f"in {c.compile_seconds * 1000:.1f} ms -> {c.directory}",
    )


@schema.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print every loaded schema as one JSON object by domain.")
@click.pass_context
@_friendly
def schema_show(ctx: click.Context, as_json: bool) -> None:
    """Print the schemas the memory holds (the ones every command reads it with)."""
    if (warm := _warm(ctx)) is not None:
        held = warm.call("GET", "/schema")["schemas"]
    else:
        held = {d: x.to_json_dict() for d, x in _app(ctx).schemas.items()}
    if as_json:
        _out(held, True, "")
        return
    click.echo("\n".join(json.dumps(body, ensure_ascii=False, indent=2) for body in held.values()))


@schema.command("history")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
@_friendly
def schema_history(ctx: click.Context, as_json: bool) -> None:
    """Every schema version the memory held, oldest first."""
    warm = _warm(ctx)
    rows = warm.call("GET", "/schema/history") if warm is not None else _app(ctx).schema_history()
    lines = [
        f"{r['stored_at']} {r['domain']} {r['schema_version']} {r['schema_id']}" + ("  (loaded)" if r["loaded"] else "")
        for r in rows
    ]
    _out(rows, as_json, "\n".join(lines) or "no schema stored")


@main.group()
def models() -> None:
    """Local models."""


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def models_list(as_json: bool) -> None:
    """Models usable here without any download."""
    from ...model.engine import available_models

    found = available_models(Settings.from_env().models_dir)
    _out(found, as_json, "\n".join(f"{m['name']}\t{m['path']}" for m in found) or "no models found")


@main.group()
def db() -> None:
    """The memory database."""


@db.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
@_friendly
def db_status(ctx: click.Context, as_json: bool) -> None:
    """Row counts and schema of the database."""
    if (warm := _warm(ctx)) is not None:
        st = {k: v for k, v in warm.call("GET", "/health").items() if k != "ok"}
    else:
        st = _app(ctx).status()
    _out(st, as_json, "\n".join(f"{k}: {v}" for k, v in st.items()))


@main.command("export")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "parquet"]),
    default=None,
    help="Output format (default: from PATH's extension, .jsonl or .parquet).",
)
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
@click.pass_context
@_friendly
def export(ctx: click.Context, path: str, fmt: str | None, force: bool) -> None:
    """Write every stored record to PATH (never overwrites without --force)."""
    if (warm := _warm(ctx)) is not None:
        kind = fmt or {".parquet": "parquet"}.get(Path(path).suffix.lower(), "jsonl")
        size = warm.download(f"/export?format={kind}", Path(path), force=force)
        click.echo(f"exported {size} bytes to {path} (from the running server)")
        return
    with bars() as report:
        n = _app(ctx).export(path, fmt=fmt, force=force, progress=report)
    click.echo(f"exported {n} records to {path}")


@main.command("backup")
@click.argument("path", type=click.Path(dir_okay=False))
@click.pass_context
@_friendly
def backup(ctx: click.Context, path: str) -> None:
    """Write a consistent snapshot of the whole database to PATH (a new file), also while a
    server holds it; `appliance --db NEW --create restore PATH` brings it back exactly."""
    if (warm := _warm(ctx)) is not None:
        size = warm.download("/backup", Path(path))
        click.echo(f"backup of the running server written to {path} ({size} bytes)")
        return
    done = _app(ctx).backup(path)
    click.echo(f"backup written to {done['path']} ({done['bytes']} bytes, {done['memories']} memories)")


@main.command("restore")
@click.argument("snapshot", type=click.Path(exists=True, dir_okay=False))
@click.pass_context
@_friendly
def restore(ctx: click.Context, snapshot: str) -> None:
    """Fill an empty database (--db NEW --create) from a backup SNAPSHOT, exactly as it was."""
    counts = _app(ctx).restore(snapshot)
    click.echo("restored " + ", ".join(f"{v} {k}" for k, v in counts.items()))


@main.command("delete")
@click.argument("memory_id")
@click.pass_context
@_friendly
def delete(ctx: click.Context, memory_id: str) -> None:
    """Delete one memory by its id."""
    if (warm := _warm(ctx)) is not None:
        warm.call("DELETE", f"/memories/{memory_id}")
    elif not _app(ctx).delete_record(memory_id):
        raise click.ClickException(f"no memory {memory_id}")
    click.echo(f"deleted {memory_id}")


@main.command("edit")
@click.argument("memory_id")
@click.option("--set", "changes", required=True, help='Fields to change as JSON, e.g. \'{"state": "shipped"}\'.')
@click.option("--json", "as_json", is_flag=True, help="Print the edited record as JSON.")
@click.pass_context
@_friendly
def edit(ctx: click.Context, memory_id: str, changes: str, as_json: bool) -> None:
    """Change one memory's fields; the result must still fit the schema."""
    from ...domain.records import MemoryRecord

    fields = _json_arg(changes, "--set")
    if not isinstance(fields, dict):
        raise click.ClickException("--set must be a JSON object of field → value")
    if (warm := _warm(ctx)) is not None:
        rec = MemoryRecord.model_validate(warm.call("PATCH", f"/memories/{memory_id}", {"changes": fields}))
    else:
        rec = _app(ctx).edit_record(memory_id, fields)
    _out(rec.model_dump(mode="json"), as_json, f"{rec.status} {rec.memory_id[:8]} {rec.summary()}")


@main.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.pass_context
@_friendly
def import_(ctx: click.Context, path: str) -> None:
    """Import records from a JSONL or Parquet export (existing ids are skipped)."""
    app = _app(ctx)
    with bars() as report:
        n, problems = (app.import_parquet if path.endswith(".parquet") else app.import_jsonl)(Path(path), report)
    click.echo(f"imported {n} records" + (f", {len(problems)} bad lines" if problems else ""))
    for p in problems[:20]:
        click.echo(f"  {p}", err=True)
    if problems:  # the good lines are in; a script must still see that some were refused
        if len(problems) > 20:
            click.echo(f"  … and {len(problems) - 20} more", err=True)
        ctx.exit(1)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=7860, show_default=True, help="Port.")
@click.option("--auth", default=None, help="user:password; required when binding beyond loopback.")
@click.pass_context
@_friendly
def serve(ctx: click.Context, host: str, port: int, auth: str | None) -> None:
    """Serve every edge from one process: the panel at /, the HTTP API (OpenAPI at
    /openapi.json) and MCP over streamable HTTP at /mcp, one warm model and one writer; the CLI
    talks to it while it runs. Stops cleanly on SIGTERM/SIGINT.

    Beyond loopback it needs a key (APPLIANCE_TOKEN / APPLIANCE_KEYS_FILE): the panel then
    logs in with --auth user:password, or with an admin key as the password."""
    from ..access import AccessPolicy
    from ..http import guarded
    from ..hub import build_hub
    from ..serving import require_key_beyond_loopback, serve_asgi

    policy = AccessPolicy.from_settings(Settings.from_env())  # refused before the memory is opened
    require_key_beyond_loopback(host, not policy.open, "set APPLIANCE_TOKEN (or a keys file) or bind 127.0.0.1")
    app = _app(ctx)
    creds = tuple(auth.split(":", 1)) if auth else None
    with spinner("loading the model and the encoder…"):
        app.warm_up()  # the first message is answered as fast as the next
    serve_asgi(guarded(build_hub(app, policy, host, creds), app, host), app, host, port, "serve")  # type: ignore[arg-type]


@main.command("http")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8765, show_default=True, help="Port.")
@click.pass_context
@_friendly
def http_api(ctx: click.Context, host: str, port: int) -> None:
    """Serve the local HTTP API until SIGTERM/SIGINT (OpenAPI at /openapi.json).

    Keys come from APPLIANCE_TOKEN / APPLIANCE_TOKEN_FILE (one admin key) or APPLIANCE_KEYS_FILE
    (keys scoped to sessions); binding beyond loopback needs one."""
    from ..http import serve_http

    serve_http(_app(ctx), host=host, port=port)


@main.command("mcp")
@click.option("--http", "over_http", is_flag=True, help="Streamable HTTP at /mcp instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (--http).")
@click.option("--port", default=8766, show_default=True, help="Port (--http).")
@click.pass_context
@_friendly
def mcp_server(ctx: click.Context, over_http: bool, host: str, port: int) -> None:
    """Serve the appliance to MCP clients (desktop agents): stdio by default, or --http.

    Tools: record, recall, query, list_entities, get_entity, edit_memory, delete_memory, forget;
    resources: the loaded schemas and each session's entities. While `appliance serve` (or
    `http`) holds the memory, stdio relays every request to that server's /mcp."""
    from ..mcp_server import serve_mcp_http, serve_mcp_stdio

    if over_http:
        serve_mcp_http(_app(ctx), host=host, port=port)
    elif (warm := _warm(ctx)) is not None:  # a server holds the memory: relay to its /mcp
        from ..mcp_relay import relay_stdio

        relay_stdio(warm.url + "/mcp", Settings.from_env().token)
    else:
        serve_mcp_stdio(_app(ctx))


@main.command()
@click.option("--session", default="demo", show_default=True, help="Session used by the demo.")
@click.pass_context
@_friendly
def demo(ctx: click.Context, session: str) -> None:
    """Record the seed messages with the shipped model, then recall them (in a scratch database,
    $APPLIANCE_HOME/demo.duckdb, emptied first; never your memory unless --db names it)."""
    if ctx.obj["db"] is None:
        scratch = Settings.from_env().home / "demo.duckdb"
        scratch.parent.mkdir(parents=True, exist_ok=True)
        for p in (scratch, scratch.with_name(scratch.name + ".wal")):
            p.unlink(missing_ok=True)
        ctx.obj["db"] = str(scratch)
    app = _loaded(_app(ctx))
    click.echo(f"model: {app.status()['model']}  schema: {app.schema.domain}  db: {app.status()['db']}")
    for msg in DEMO_MESSAGES:
        t = time.perf_counter()
        rec = app.record(msg, session_id=session)
        click.echo(
            f"[record {time.perf_counter() - t:4.2f}s] {msg}\n    -> {rec.status} conf={rec.confidence:.2f} "
            f"{rec.summary()}"
        )
    for q in DEMO_QUESTIONS:
        t = time.perf_counter()
        res = app.recall(q, session_id=session)
        click.echo(
            f"[recall {time.perf_counter() - t:4.2f}s] {q}\n    query: "
            f"{res.query.model_dump_json(exclude_defaults=True)}\n    sql: {res.sql}\n"
            + "\n".join("    " + line for line in res.context.splitlines())
        )


@main.command("crash-check")
@click.option("--kills", default=50, show_default=True, help="How many SIGKILLs to deliver.")
@click.option("--seed", default=0, show_default=True, help="Random seed for kill timing.")
@click.option(
    "--real/--fake", default=True, show_default=True, help="The shipped model's record path, or a fake model."
)
def crash_check(kills: int, seed: int, real: bool) -> None:
    """Kill a recording process KILLS times with SIGKILL and verify the database each time
    (default: the real record path — model, vectors, resolution, two schemas)."""
    import tempfile

    from ..crashcheck import run_crash_check

    with tempfile.TemporaryDirectory() as d:
        report = run_crash_check(Path(d), kills=kills, seed=seed, real=real)
    click.echo(report.line())
    for p in report.problems or []:
        click.echo(f"  {p}", err=True)
    if report.lost or report.corrupt:
        sys.exit(1)


if __name__ == "__main__":
    main()


from .lifecycle import register  # noqa: E402 - commands that need main/schema/db defined above

register(main, schema, db, _app, _out, _friendly, _warm)
