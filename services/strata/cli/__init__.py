"""The ``strata`` command (Typer + Rich): ``strata broker`` now; ``dev``, ``admin``, ``topic``,
``produce``, ``consume``, ``groups`` and ``bench`` as their issues land."""
