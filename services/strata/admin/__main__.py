"""``python -m strata.admin``: the ``strata admin`` command on its own (same options)."""

from __future__ import annotations

import typer

from strata.cli.admin import admin

if __name__ == "__main__":
    typer.run(admin)
