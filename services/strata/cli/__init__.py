"""The ``strata`` command (Typer + Rich): one module per command group; ``strata --help`` lists
them and docs/operations.md shows them in use."""
