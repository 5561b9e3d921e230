"""Jute, ZooKeeper's record serialization, as a sans-I/O codec.

Byte grammar (big-endian, no tags, no padding):
    int     := 4 bytes signed            long := 8 bytes signed
    boolean := 1 byte (0 or 1)
    buffer  := int length, then length bytes; length -1 means null
    ustring := int length, then UTF-8 bytes; length -1 means null
    vector  := int count, then count elements; count -1 means null
    record  := its fields in declaration order

A record is a frozen, slotted dataclass whose fields carry their jute types through
the annotations below (``Int``, ``Long``, ``Bool``, ``Buffer``, ``UString``, another record,
or ``list[...]`` of those). Its reader and writer are generated source, one pair per class in
``wire/codecs.py`` (``codec_source`` gives their text, packing runs of fixed-width fields into
one ``struct.Struct``; ``python -m zkpy.wire.codegen`` writes the file), which ``@jute_record``
binds to the class.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import zlib
from typing import (
    Annotated,
    Any,
    ClassVar,
    TypeVar,
    Union,
    cast,
    dataclass_transform,
    get_args,
    get_origin,
    get_type_hints,
)

from zkpy.errors import ProtocolError

# re-exported: the primitives live apart so the generated codecs need not import this module
from .primitives import INT as INT
from .primitives import read_buffer as read_buffer
from .primitives import read_ustring as read_ustring
from .primitives import write_buffer as write_buffer
from .primitives import write_ustring as write_ustring

Int = Annotated[int, "int"]
Long = Annotated[int, "long"]
Bool = Annotated[bool, "boolean"]
Buffer = Annotated["bytes | None", "buffer"]
UString = Annotated[str, "ustring"]  # a null ustring decodes to None

LONG = struct.Struct(">q")
_FIXED = {"int": ("i", 4), "long": ("q", 8), "boolean": ("?", 1)}

T = TypeVar("T")


class Record:
    """Base of every jute record: serialization entry points."""

    __slots__ = ()
    JUTE_FIELDS: ClassVar[tuple[tuple[str, Any], ...]]

    def write(self, out: bytearray) -> None:  # replaced per class by @jute_record
        raise NotImplementedError

    @classmethod
    def read(cls: type[T], buf: bytes | memoryview, pos: int) -> tuple[T, int]:  # replaced per class
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        out = bytearray()
        self.write(out)
        return bytes(out)

    @classmethod
    def from_bytes(cls: type[T], data: bytes | memoryview) -> T:
        """Decode exactly one record; trailing bytes are allowed as ZooKeeper allows them."""
        try:
            obj, _ = cls.read(data, 0)  # type: ignore[attr-defined]
        except (struct.error, IndexError, ValueError, ProtocolError) as exc:
            raise ProtocolError(f"malformed {cls.__name__}: {exc}") from exc
        return cast(T, obj)


_PRIMITIVES = {"read_buffer": read_buffer, "read_ustring": read_ustring, "write_buffer": write_buffer,
               "write_ustring": write_ustring}  # what a codec's source calls by name


def vector_codec(elem: Any) -> tuple[Any, Any]:
    """Reader and writer for vector<elem>; a null vector decodes to []."""
    r_one: Any
    w_one: Any
    if elem == "ustring":
        r_one, w_one = read_ustring, write_ustring
    elif elem == "buffer":
        r_one, w_one = read_buffer, write_buffer
    elif isinstance(elem, str):
        st = struct.Struct(">" + _FIXED[elem][0])

        def r_one(buf: Any, pos: int) -> tuple[Any, int]:
            return st.unpack_from(buf, pos)[0], pos + st.size

        def w_one(out: bytearray, v: Any) -> None:
            out += st.pack(v)
    else:
        r_one = elem.read

        def w_one(out: bytearray, v: Any) -> None:
            v.write(out)

    def read_vec(buf: Any, pos: int) -> tuple[list[Any], int]:
        (n,) = INT.unpack_from(buf, pos)
        pos += 4
        if n < 0:
            return [], pos
        if n > len(buf) - pos:  # every element takes at least one byte
            raise ProtocolError(f"vector count {n} runs past the frame")
        items = []
        for _ in range(n):
            v, pos = r_one(buf, pos)
            items.append(v)
        return items, pos

    def write_vec(out: bytearray, values: Any) -> None:
        if values is None:
            out += b"\xff\xff\xff\xff"
            return
        out += INT.pack(len(values))
        for v in values:
            w_one(out, v)

    if getattr(elem, "JUTE_VECTOR_MEMO", False):
        # a vector of small immutable records that most requests repeat byte for byte (a create's
        # ACL): the last one read is kept with its bytes, and the same bytes give a copy of it
        plain_read = read_vec
        last: list[Any] = [None]  # (bytes, items) of the last vector read, swapped whole (threads)

        def read_vec(buf: Any, pos: int) -> tuple[list[Any], int]:  # (the same bytes parse the same)
            known = last[0]
            if known is not None:
                end = pos + len(known[0])
                if buf[pos:end] == known[0]:
                    return list(known[1]), end
            items, end = plain_read(buf, pos)
            last[0] = (bytes(buf[pos:end]), items)
            return list(items), end

    return read_vec, write_vec


def _jute_type(hint: Any) -> Any:
    """Map an annotation to a jute type: 'int', 'long', ..., a record class, or ('vector', elem).
    ``list[X] | None`` is a vector that may be written null (it reads back as [])."""
    if get_origin(hint) is Annotated:
        return get_args(hint)[1]
    if get_origin(hint) in (Union, types.UnionType):
        present = [a for a in get_args(hint) if a is not type(None)]
        if len(present) == 1 and get_origin(present[0]) is list:
            return _jute_type(present[0])
    if get_origin(hint) is list:
        return ("vector", _jute_type(get_args(hint)[0]))
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint
    if hint is str:
        return "ustring"
    raise TypeError(f"no jute type for annotation {hint!r}")


def codec_source(cls: type, fields: tuple[tuple[str, Any], ...]) -> tuple[str, dict[str, Any]]:
    """The source of ``cls``'s reader and writer (functions ``<key>_read`` and ``<key>_write``,
    ``key`` from ``codec_key``), and the objects its other names stand for (the class, the
    structs for runs of fixed-width fields, the vector codecs, nested records' readers): the text
    ``wire/codecs.py`` holds for it (``python -m zkpy.wire.codegen`` writes that file)."""
    key = codec_key(cls)
    ns: dict[str, Any] = {f"_{key}_cls": cls}
    rlines = [f"def {key}_read(buf: Any, pos: int) -> tuple[Any, int]:"]
    wlines = [f"def {key}_write(self: Any, out: bytearray) -> None:"]
    names = [name for name, _ in fields]
    i = 0
    while i < len(fields):
        name, jt = fields[i]
        if isinstance(jt, str) and jt in _FIXED:
            run = []
            while i < len(fields) and isinstance(fields[i][1], str) and fields[i][1] in _FIXED:
                run.append(fields[i])
                i += 1
            sname = f"_{key}_s{len(ns)}"
            ns[sname] = struct.Struct(">" + "".join(_FIXED[t][0] for _, t in run))
            targets = ", ".join(n for n, _ in run) + ","
            rlines.append(f"    {targets} = {sname}.unpack_from(buf, pos)")
            rlines.append(f"    pos += {ns[sname].size}")
            wlines.append(f"    out += {sname}.pack({', '.join('self.' + n for n, _ in run)})")
            continue
        if jt == "buffer":
            rlines.append(f"    {name}, pos = read_buffer(buf, pos)")
            wlines.append(f"    write_buffer(out, self.{name})")
        elif jt == "ustring":
            rlines.append(f"    {name}, pos = read_ustring(buf, pos)")
            wlines.append(f"    write_ustring(out, self.{name})")
        elif isinstance(jt, tuple):
            rv, wv = vector_codec(jt[1])
            ns[f"_{key}_rv_{name}"], ns[f"_{key}_wv_{name}"] = rv, wv
            rlines.append(f"    {name}, pos = _{key}_rv_{name}(buf, pos)")
            wlines.append(f"    _{key}_wv_{name}(out, self.{name})")
        else:
            ns[f"_{key}_rr_{name}"] = jt.read
            rlines.append(f"    {name}, pos = _{key}_rr_{name}(buf, pos)")
            wlines.append(f"    self.{name}.write(out)")
        i += 1
    rlines.append(f"    return _{key}_cls({', '.join(names)}), pos")
    if not names:
        wlines.append("    pass")
    return "\n".join(rlines) + "\n\n\n" + "\n".join(wlines) + "\n", ns


def codec_key(cls: type) -> str:
    """The prefix of a record's names in ``wire/codecs.py``: its module's last part and its name."""
    return f"{cls.__module__.rpartition('.')[2]}_{cls.__name__}"


GENERATING = False  # set by wire.codegen while it imports the records to write wire/codecs.py
GENERATED: list[tuple[str, str]] = []  # (key, source) of every record decorated, in order


class StaleCodecs(RuntimeError):
    """A record's annotations no longer give the source ``wire/codecs.py`` holds for it."""


@dataclass_transform(frozen_default=True)
def jute_record(cls: type[T]) -> type[T]:
    """Make ``cls`` a slotted dataclass with its jute reader and writer from ``wire/codecs.py``
    (generated source: ``codec_source`` gives each record's text, and the record's objects are
    bound to its names there). Raises StaleCodecs when the record no longer matches the file:
    run ``python -m zkpy.wire.codegen``. Frozen for the type checker (``dataclass_transform``),
    which is where its immutability is kept: a frozen dataclass's ``__init__`` pays a call per
    field at run time, and records are built on every request. Hashed by value, like a frozen one."""
    cls = dataclasses.dataclass(slots=True, unsafe_hash=True)(cls)
    hints = get_type_hints(cls, include_extras=True)
    fields = tuple((f.name, _jute_type(hints[f.name])) for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    source, objects = codec_source(cls, fields)
    key = codec_key(cls)
    if GENERATING:
        GENERATED.append((key, source))
        namespace = {**objects, **_PRIMITIVES, "Any": Any}
        exec(source, namespace)  # noqa: S102 - the text being generated, while it is
        read, write = namespace[f"{key}_read"], namespace[f"{key}_write"]
    else:
        from zkpy.wire import codecs

        if codecs.SOURCES.get(key) != zlib.crc32(source.encode()):
            raise StaleCodecs(f"wire/codecs.py does not match the record {cls.__module__}.{cls.__name__}: "
                              "run python -m zkpy.wire.codegen")
        vars(codecs).update(objects)
        read, write = getattr(codecs, f"{key}_read"), getattr(codecs, f"{key}_write")
    cls.read = staticmethod(read)  # type: ignore[attr-defined]
    cls.write = write  # type: ignore[attr-defined]
    cls.JUTE_FIELDS = fields  # type: ignore[attr-defined]
    return cls
