"""Progress of long CLI steps on the terminal (rich): a spinner while the model loads, bars for
import, export and compaction. Drawn on stderr and only when it is a terminal, so scripts and
``--json`` output read exactly what they read without it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

__all__ = ["bars", "spinner"]

Report = Callable[[str, int, int | None], None]


def _console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def spinner(what: str) -> Any:
    """A spinner with ``what`` while a step of unknown length runs (loading the model)."""
    console = _console()
    return console.status(what, spinner="dots") if console.is_terminal else nullcontext()


@contextmanager
def bars() -> Iterator[Report]:
    """A report function drawing one bar per stage ("reading", "storing", "exporting"); a stage
    without a total shows a count."""
    console = _console()
    if not console.is_terminal:
        yield lambda stage, done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        tasks: dict[str, Any] = {}

        def report(stage: str, done: int, total: int | None) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(stage, total=total)
            progress.update(tasks[stage], completed=done, total=total)

        yield report
