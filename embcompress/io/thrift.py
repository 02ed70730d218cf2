"""The Thrift compact protocol, as parquet uses it for page headers and the file footer: read into
typed fields (so that a footer can be changed and written back) and written from them.

A struct is a list of :class:`Field` (id, compact type, value). Values: ints for BYTE/I16/I32/I64,
bools for BOOL, bytes for BINARY, a float for DOUBLE, a :class:`List` for LIST and SET, a struct
for STRUCT. :func:`plain` turns a struct into nested dicts keyed by field id, for reading.
Malformed input raises ``IndexError`` when it ends early and :class:`ThriftError` otherwise.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)
BOOL = BOOL_TRUE  # the type to give a boolean field; written as BOOL_TRUE or BOOL_FALSE by value


class ThriftError(ValueError):
    pass


@dataclass
class Field:
    fid: int
    type: int
    value: Any


@dataclass
class List:
    elem_type: int
    items: list


# ---- reading ------------------------------------------------------------------------------------


def varint(buf, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 70:
            raise ThriftError("varint too long")


def _zigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def _read_value(buf, i: int, t: int):
    if t in (BOOL_TRUE, BOOL_FALSE):  # a field's type carries its value
        return t == BOOL_TRUE, i
    if t == BYTE:
        v = buf[i]
        return v - 256 if v > 127 else v, i + 1
    if t in (I16, I32, I64):
        v, i = varint(buf, i)
        return _zigzag(v), i
    if t == DOUBLE:
        if i + 8 > len(buf):
            raise IndexError
        return struct.unpack_from("<d", buf, i)[0], i + 8
    if t == BINARY:
        n, i = varint(buf, i)
        if i + n > len(buf):
            raise IndexError
        return bytes(buf[i : i + n]), i + n
    if t in (LIST, SET):
        head = buf[i]
        i += 1
        n, et = head >> 4, head & 0x0F
        if n == 15:
            n, i = varint(buf, i)
        items = []
        for _ in range(n):
            v, i = _read_element(buf, i, et)
            items.append(v)
        return List(et, items), i
    if t == MAP:
        n, i = varint(buf, i)
        if n:
            kv = buf[i]
            i += 1
            for k in range(2 * n):
                _, i = _read_element(buf, i, kv >> 4 if k % 2 == 0 else kv & 0x0F)
        return None, i
    if t == STRUCT:
        return read_struct(buf, i)
    raise ThriftError(f"unknown thrift type {t}")


def _read_element(buf, i: int, t: int):
    """A list, set or map element: booleans take a byte there (every element consumes input)."""
    if t in (BOOL_TRUE, BOOL_FALSE):
        return buf[i] == BOOL_TRUE, i + 1
    return _read_value(buf, i, t)


def read_struct(buf, i: int = 0) -> tuple[list[Field], int]:
    """The struct starting at ``buf[i]``: (its fields, the index after it)."""
    fields: list[Field] = []
    last = 0
    while True:
        head = buf[i]
        i += 1
        if head == 0:
            return fields, i
        t, delta = head & 0x0F, head >> 4
        if delta:
            fid = last + delta
        else:
            v, i = varint(buf, i)
            fid = _zigzag(v)
        value, i = _read_value(buf, i, t)
        fields.append(Field(fid, BOOL if t in (BOOL_TRUE, BOOL_FALSE) else t, value))
        last = fid


def plain(value):
    """Typed fields -> nested dicts by field id (lists of plain values), for reading."""
    if isinstance(value, list) and (not value or isinstance(value[0], Field)):
        return {f.fid: plain(f.value) for f in value}
    if isinstance(value, List):
        return [plain(v) for v in value.items]
    return value


def get(fields: list[Field], fid: int) -> Field | None:
    return next((f for f in fields if f.fid == fid), None)


def put(fields: list[Field], fid: int, type_: int, value) -> None:
    """Set field ``fid`` (added in id order when missing)."""
    for f in fields:
        if f.fid == fid:
            f.type, f.value = type_, value
            return
    fields.append(Field(fid, type_, value))
    fields.sort(key=lambda f: f.fid)


# ---- writing ------------------------------------------------------------------------------------


def encode_uvarint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _zz(v: int) -> bytes:
    return encode_uvarint((v << 1) ^ (v >> 63))


def _write_value(out: bytearray, t: int, v) -> None:
    if t == BYTE:
        out.append(v & 0xFF)
    elif t in (I16, I32, I64):
        out += _zz(int(v))
    elif t == DOUBLE:
        out += struct.pack("<d", v)
    elif t == BINARY:
        b = v.encode() if isinstance(v, str) else bytes(v)
        out += encode_uvarint(len(b)) + b
    elif t in (LIST, SET):
        n, et = len(v.items), v.elem_type
        out.append((n << 4 | et) if n < 15 else (0xF0 | et))
        if n >= 15:
            out += encode_uvarint(n)
        for item in v.items:
            if et in (BOOL_TRUE, BOOL_FALSE):
                out.append(BOOL_TRUE if item else BOOL_FALSE)
            else:
                _write_value(out, et, item)
    elif t == STRUCT:
        out += write_struct(v)
    else:
        raise ThriftError(f"cannot write thrift type {t}")


def write_struct(fields: list[Field]) -> bytes:
    out = bytearray()
    last = 0
    for f in sorted(fields, key=lambda f: f.fid):
        t = (BOOL_TRUE if f.value else BOOL_FALSE) if f.type in (BOOL_TRUE, BOOL_FALSE) else f.type
        delta = f.fid - last
        if 0 < delta <= 15:
            out.append(delta << 4 | t)
        else:
            out.append(t)
            out += _zz(f.fid)
        if t not in (BOOL_TRUE, BOOL_FALSE):
            _write_value(out, t, f.value)
        last = f.fid
    out.append(0)
    return bytes(out)
