"""A replay's output folder as DuckDB tables: ``spatec sql OUT "SELECT ..."``.

Each phrase the run wrote (``_manifest.json`` names them) is a view named after the
phrase, with the columns of its records: ``lo``, ``hi`` and every emitted time as
``TIMESTAMPTZ`` (shown in the program's time zone unless told otherwise), durations,
distances, speeds and areas as numbers in base units (seconds, metres, m/s, m²), ``events``
and ``places`` as structs, and ``hull`` a ``GEOMETRY`` in lon/lat where DuckDB's spatial
extension loads (the PyPI package ``duckdb-extension-spatial``, or one installed in
DuckDB's own folder), else its WKT text. ``rejects`` holds the run's rejects, when it has
any, with a ``type`` column.

>>> con, info = connect("out/")                                      # doctest: +SKIP
>>> con.sql("SELECT line, median(minutes) FROM HospitalToStation GROUP BY line")  # doctest: +SKIP
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from spatec.errors import SpatecError


class SqlError(SpatecError):
    """A folder that is not a replay's outputs, or a query DuckDB refuses."""


@dataclass
class Tables:
    """What :func:`connect` made: phrase → table, whether ``hull`` is a geometry, notes for the user."""

    tables: dict = field(default_factory=dict)     # view name → (file, composites)
    spatial: bool = False
    tz: str = "UTC"
    notes: list = field(default_factory=list)


def _manifest(out: Path) -> dict:
    if not out.exists():
        raise SqlError(f"{out}: no such folder (give the --out folder of a `spatec replay`)")
    if not out.is_dir():
        raise SqlError(f"{out}: not a folder (give the --out folder of a `spatec replay`)")
    path = out / "_manifest.json"
    if not path.is_file():
        raise SqlError(f"{out}: not a replay's output folder (it has no _manifest.json); give the --out "
                       "folder of a `spatec replay`")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SqlError(f"{path}: cannot read the run's manifest ({e})") from None


def load_spatial(con) -> bool:
    """Load DuckDB's spatial extension without the network: the PyPI package's file, or one
    DuckDB has installed. False when neither loads (the hull stays WKT text)."""
    import duckdb

    try:
        import duckdb_extension_spatial
    except ImportError:
        duckdb_extension_spatial = None
    if duckdb_extension_spatial is not None:
        folder = Path(duckdb_extension_spatial.__file__).parent / "extensions" / f"v{duckdb.__version__}"
        ext = folder / "spatial.duckdb_extension"
        if ext.is_file():
            try:
                con.execute(f"LOAD '{ext}'")
                return True
            except duckdb.Error:
                pass
    try:
        con.execute("LOAD spatial")      # installed into DuckDB's own folder (never INSTALL: no network)
        return True
    except duckdb.Error:
        return False


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def connect(out, tz: str | None = None, spatial: bool = True):
    """A DuckDB connection with a view per phrase of the run in ``out``; ``tz``: the zone times
    are shown in (default: the program's). Returns ``(connection, Tables)``."""
    import duckdb

    out = Path(out)
    manifest = _manifest(out)
    info = Tables(tz=tz or (manifest.get("program") or {}).get("timezone") or "UTC")
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"SET TimeZone = {_literal(info.tz)}")
    except duckdb.Error as e:
        raise SqlError(f"--tz {info.tz!r}: not a time zone DuckDB knows ({e})") from None
    info.spatial = spatial and load_spatial(con)
    if spatial and not info.spatial:
        info.notes.append("hull is WKT text: DuckDB's spatial extension is not loadable here "
                          "(pip install duckdb-extension-spatial)")
    for entry in manifest.get("outputs", []):
        name, path, fmt = entry.get("phrase"), out / entry.get("path", ""), entry.get("format")
        if not name or not path.is_file():
            info.notes.append(f"{name}: its output {path} is missing")
            continue
        if fmt not in ("jsonl", "parquet"):
            info.notes.append(f"{name}: a {fmt} output is not read (replay with --format jsonl or parquet)")
            continue
        _view(con, name, path, fmt, info, empty=entry.get("composites") == 0)
        info.tables[name] = (path, entry.get("composites"))
    rejects = sorted((out / "_rejects").glob("*.jsonl")) if (out / "_rejects").is_dir() else []
    if rejects:
        files = "[" + ", ".join(_literal(str(p)) for p in rejects) + "]"
        con.execute(f"CREATE VIEW rejects AS SELECT regexp_extract(filename, '([^/]+)\\.jsonl$', 1) AS type, "
                    f"* EXCLUDE (filename) FROM read_json({files}, format='newline_delimited', filename=true, "
                    f"columns={{'file': 'VARCHAR', 'row': 'BIGINT', 'reason': 'VARCHAR', 'record': 'JSON'}})")
        info.tables["rejects"] = (out / "_rejects", None)
    if not info.tables:
        raise SqlError(f"{out}: the run wrote no output spatec sql can read"
                       + (f" ({'; '.join(info.notes)})" if info.notes else ""))
    return con, info


_STANDARD = "phrase VARCHAR, id VARCHAR, lo TIMESTAMPTZ, hi TIMESTAMPTZ, hull VARCHAR, events JSON"


def _view(con, name: str, path: Path, fmt: str, info: Tables, empty: bool) -> None:
    if empty:   # no record to take the columns from: the standard ones
        cols = _STANDARD.replace("hull VARCHAR", "hull GEOMETRY") if info.spatial else _STANDARD
        con.execute(f"CREATE VIEW {_ident(name)} AS SELECT * FROM (SELECT "
                    + ", ".join(f"NULL::{c.split(' ', 1)[1]} AS {c.split(' ', 1)[0]}" for c in cols.split(", "))
                    + ") WHERE false")
        return
    source = (f"read_parquet({_literal(str(path))})" if fmt == "parquet"
              else f"read_json({_literal(str(path))}, format='newline_delimited')")
    types = {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    replace = []
    for col, t in types.items():
        if t == "TIMESTAMP":         # ISO 8601 text read as UTC: an instant
            replace.append(f"timezone('UTC', {_ident(col)}) AS {_ident(col)}")
    if "hull" in types:
        if info.spatial and types["hull"] == "VARCHAR":
            replace.append("ST_GeomFromText(hull) AS hull")
        elif info.spatial and types["hull"] == "BLOB":
            replace.append("ST_GeomFromWKB(hull) AS hull")
        elif not info.spatial and types["hull"] == "BLOB":
            info.notes.append(f"{name}: hull is WKB bytes (GeoParquet) without the spatial extension")
    select = f"* REPLACE ({', '.join(replace)})" if replace else "*"
    con.execute(f"CREATE VIEW {_ident(name)} AS SELECT {select} FROM {source}")


def run_query(con, query: str, info: Tables):
    """The query's result (a DuckDB relation); :class:`SqlError` with DuckDB's message and the
    tables there are when DuckDB refuses it."""
    import duckdb

    if not query.strip():
        raise SqlError("the query is empty; e.g. spatec sql OUT \"SELECT count(*) FROM "
                       f"{next(iter(info.tables))}\"")
    try:
        return con.sql(query)
    except duckdb.Error as e:
        hint = f"tables: {', '.join(info.tables)}"
        if isinstance(e, duckdb.ParserException):
            hint += "; a table or column named like an SQL keyword (left, order, from) goes in double quotes"
        raise SqlError(f"the query does not run: {str(e).strip()}\n    {hint}") from None
