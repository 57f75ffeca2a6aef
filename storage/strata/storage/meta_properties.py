"""``meta.properties``: the identity card of one log dir (Kafka's ``MetaProperties``, KRaft v1).

Owns the file ``<log dir>/meta.properties``, which says which cluster and which node a log dir
belongs to, so a disk moved to the wrong broker, or a broker pointed at another cluster's data,
refuses to start instead of serving (or destroying) foreign data.

File format: Java ``.properties`` text in UTF-8, exactly as Kafka's ``kafka-storage format``
writes it in KRaft mode, plus one Strata key::

    #
    version=1                       Kafka's meta.properties version; 1 = KRaft (0 = ZooKeeper)
    cluster.id=MkU3OEVBNTcwNTJENDM2Qk   the cluster's id (Kafka: a base64url Uuid)
    node.id=1                       this broker's node id, >= 0
    directory.id=8wQ2Tj4bQ_i3Kkq0pGY2Rw the log dir's own Uuid (base64url, 22 characters)
    strata.format.version=1         Strata's on-disk format of this log dir

Kafka ignores keys it does not know, so the file stays readable by Kafka's tools. Reading accepts
the whole ``.properties`` syntax (comments ``#``/``!``, ``=``, ``:`` or blank separators,
backslash escapes and line continuations).

Versions and rolling upgrades: ``strata.format.version`` is the layout version of everything in
the dir (segments, checkpoints, snapshots). A Strata reads every format up to
``CURRENT_STRATA_FORMAT_VERSION`` and refuses a newer one with a clear error (a downgrade past a
format change). ``ensure_meta_properties`` upgrades an older or missing format key, and adds a
missing ``directory.id``, by rewriting the file — so a later Strata can migrate a dir during a
rolling restart and record that it did.

Crash policy: written atomically (``meta.properties.tmp``, fsync, rename, fsync dir); the file
is either the old one or the new one. A malformed file raises ``MetaPropertiesError`` — never
silently replaced, since that would erase the dir's identity.

Who mutates: ``LogManager.startup`` through ``ensure_meta_properties``, once per dir, before any
partition in that dir is loaded. Nothing else writes the file.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from strata.storage.checkpoints import atomic_write, parse_int
from strata.storage.errors import KafkaStorageError, StorageError

META_PROPERTIES_FILE_NAME = "meta.properties"

VERSION_KEY = "version"
CLUSTER_ID_KEY = "cluster.id"
NODE_ID_KEY = "node.id"
DIRECTORY_ID_KEY = "directory.id"
STRATA_FORMAT_VERSION_KEY = "strata.format.version"

META_PROPERTIES_VERSION = 1  # Kafka's MetaPropertiesVersion.V1 (KRaft)
CURRENT_STRATA_FORMAT_VERSION = 1
NO_STRATA_FORMAT_VERSION = 0  # the key is absent (e.g. a dir formatted by Kafka's tools)

_RESERVED_UUIDS = 100  # Kafka's Uuid.RESERVED: 0 .. 99 in the low 64 bits, high bits zero


class MetaPropertiesError(StorageError):
    """``meta.properties`` is malformed, of an unsupported version, or names another identity."""


class InconsistentClusterIdError(MetaPropertiesError):
    error_code = 104
    error_name = "INCONSISTENT_CLUSTER_ID"


class InconsistentNodeIdError(MetaPropertiesError):
    """The log dir belongs to another node of the cluster."""


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str | None = None
    version: int = META_PROPERTIES_VERSION
    strata_format_version: int = CURRENT_STRATA_FORMAT_VERSION

    def to_properties(self) -> dict[str, str]:
        """The keys in the order they are written."""
        props = {
            VERSION_KEY: str(self.version),
            CLUSTER_ID_KEY: self.cluster_id,
            NODE_ID_KEY: str(self.node_id),
        }
        if self.directory_id is not None:
            props[DIRECTORY_ID_KEY] = self.directory_id
        if self.strata_format_version != NO_STRATA_FORMAT_VERSION:
            props[STRATA_FORMAT_VERSION_KEY] = str(self.strata_format_version)
        return props

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], source: str = META_PROPERTIES_FILE_NAME
    ) -> MetaProperties:
        """Validate the keys; raises ``MetaPropertiesError`` naming ``source``."""
        version = _int_key(props, VERSION_KEY, source)
        if version == 0:
            raise MetaPropertiesError(
                f"{source} has version=0 (a ZooKeeper-mode broker's log dir); Strata supports "
                f"only KRaft-style version={META_PROPERTIES_VERSION}"
            )
        if version != META_PROPERTIES_VERSION:
            raise MetaPropertiesError(f"{source} has unsupported version={version}")
        cluster_id = props.get(CLUSTER_ID_KEY, "").strip()
        if not cluster_id:
            raise MetaPropertiesError(f"{source} has no {CLUSTER_ID_KEY}")
        node_id = _int_key(props, NODE_ID_KEY, source)
        if node_id < 0:
            raise MetaPropertiesError(f"{source} has a negative {NODE_ID_KEY}={node_id}")
        directory_id = props.get(DIRECTORY_ID_KEY)
        if directory_id is not None and not is_valid_directory_id(directory_id):
            raise MetaPropertiesError(f"{source} has an invalid {DIRECTORY_ID_KEY}={directory_id}")
        fmt = NO_STRATA_FORMAT_VERSION
        if STRATA_FORMAT_VERSION_KEY in props:
            fmt = _int_key(props, STRATA_FORMAT_VERSION_KEY, source)
            if fmt < 1:
                raise MetaPropertiesError(f"{source} has invalid {STRATA_FORMAT_VERSION_KEY}={fmt}")
        return cls(cluster_id, node_id, directory_id, version, fmt)


def _int_key(props: Mapping[str, str], key: str, source: str) -> int:
    if key not in props:
        raise MetaPropertiesError(f"{source} has no {key}")
    value = parse_int(props[key].strip())
    if value is None:
        raise MetaPropertiesError(f"{source} has a non-integer {key}={props[key]!r}")
    return value


# ------------------------------------------------------------------------ Uuids
def _uuid_to_string(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def generate_directory_id() -> str:
    """A random Kafka ``Uuid`` string, never a reserved one nor one starting with '-'."""
    while True:
        raw = uuid.uuid4().bytes
        text = _uuid_to_string(raw)
        if not _is_reserved(raw) and not text.startswith("-"):
            return text


def _is_reserved(raw: bytes) -> bool:
    return int.from_bytes(raw, "big") < _RESERVED_UUIDS


def is_valid_directory_id(text: str) -> bool:
    if len(text) != 22:
        return False
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except ValueError:
        return False
    return len(raw) == 16 and _uuid_to_string(raw) == text and not _is_reserved(raw)


# ------------------------------------------------------- Java .properties syntax
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANK = " \t\f"


def _logical_lines(text: str) -> list[str]:
    """Join continuation lines (an odd number of trailing backslashes); drop comments/blanks."""
    out: list[str] = []
    pending: str | None = None
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw.lstrip(_BLANK)
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        if continued:
            line = line[:-1]
        pending = line if pending is None else pending + line
        if not continued:
            out.append(pending)
            pending = None
    if pending is not None:
        out.append(pending)
    return out


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u":
                digits = text[i + 2 : i + 6]
                if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                    raise ValueError(f"malformed \\uXXXX escape in {text!r}")
                out.append(chr(int(digits, 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (``Properties.load`` rules); later keys win."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n:
            ch = line[i]
            if ch == "\\":
                i += 2
                continue
            if ch in "=:" or ch in _BLANK:
                break
            i += 1
        key_end = min(i, n)
        j = key_end
        while j < n and line[j] in _BLANK:
            j += 1
        if j < n and line[j] in "=:":
            j += 1
            while j < n and line[j] in _BLANK:
                j += 1
        props[_unescape(line[:key_end])] = _unescape(line[j:])
    return props


def _escape(text: str, is_key: bool) -> str:
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ch in "\\=:#!":
            out.append("\\" + ch)
        elif ch in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def format_properties(props: Mapping[str, str]) -> str:
    """Java ``Properties.store`` style: a comment line, then ``key=value`` lines."""
    lines = ["#"] + [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- read / write
def meta_properties_path(log_dir: Path) -> Path:
    return Path(log_dir) / META_PROPERTIES_FILE_NAME


def read_meta_properties(log_dir: Path) -> MetaProperties | None:
    """The dir's ``meta.properties``, or None if it has none. Raises ``MetaPropertiesError``."""
    path = meta_properties_path(log_dir)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KafkaStorageError(f"cannot read {path}: {exc}") from exc
    try:
        props = parse_properties(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MetaPropertiesError(f"{path} is not a valid properties file: {exc}") from exc
    return MetaProperties.from_properties(props, str(path))


def write_meta_properties(log_dir: Path, meta: MetaProperties) -> None:
    """Atomically (re)write the dir's ``meta.properties``."""
    text = format_properties(meta.to_properties())
    atomic_write(meta_properties_path(log_dir), text.encode("utf-8"))


def ensure_meta_properties(log_dir: Path, cluster_id: str, node_id: int) -> MetaProperties:
    """Create ``meta.properties`` if absent, else check it names this cluster and node.

    Raises ``InconsistentClusterIdError`` / ``InconsistentNodeIdError`` when the dir belongs to
    another cluster or node, ``MetaPropertiesError`` for a malformed file or a format newer than
    this Strata understands. Upgrades an older format key and adds a missing ``directory.id``.
    """
    if not cluster_id:
        raise ValueError("cluster_id must not be empty")
    if node_id < 0:
        raise ValueError(f"node_id must be >= 0, got {node_id}")
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    path = meta_properties_path(log_dir)
    existing = read_meta_properties(log_dir)
    if existing is None:
        created = MetaProperties(cluster_id, node_id, generate_directory_id())
        write_meta_properties(log_dir, created)
        return created
    if existing.cluster_id != cluster_id:
        raise InconsistentClusterIdError(
            f"{path}: the log dir belongs to cluster.id {existing.cluster_id}, but this broker "
            f"is in cluster.id {cluster_id}"
        )
    if existing.node_id != node_id:
        raise InconsistentNodeIdError(
            f"{path}: the log dir belongs to node.id {existing.node_id}, but this broker is "
            f"node.id {node_id}"
        )
    if existing.strata_format_version > CURRENT_STRATA_FORMAT_VERSION:
        raise MetaPropertiesError(
            f"{path}: {STRATA_FORMAT_VERSION_KEY}={existing.strata_format_version} was written "
            f"by a newer Strata; this version reads up to {CURRENT_STRATA_FORMAT_VERSION}"
        )
    upgraded = replace(
        existing,
        directory_id=existing.directory_id or generate_directory_id(),
        strata_format_version=CURRENT_STRATA_FORMAT_VERSION,
    )
    if upgraded != existing:
        write_meta_properties(log_dir, upgraded)
    return upgraded


ensure = ensure_meta_properties  # short alias
