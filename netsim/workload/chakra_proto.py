"""The Chakra execution-trace encoding: its protobuf messages, the length-delimited file framing, and a
small writer (node constructors and :func:`write_trace`).

Written from the published schema (``schema/protobuf/et_def.proto`` of mlcommons/chakra, package
``ChakraProtoMsg``, proto3): the message descriptors are built here at import, in a private
descriptor pool, so neither ``protoc`` nor a Chakra install is needed and an installed Chakra's
own classes never clash with these. Messages: ``GlobalMetadata`` (version, attributes), ``Node``
(id, name, type, ctrl/data dependencies, start time and duration in microseconds, inputs/outputs,
attributes) and ``AttributeProto`` (a name and one typed value or list); enums ``NodeType`` and
``CollectiveCommType``. The ``Node.storage`` field (11, storage operations) is left out: a reader
keeps it as an unknown field.

An ET file is a sequence of messages, each preceded by its length as a base-128 varint (the
framing of Chakra's ``protolib``): one ``GlobalMetadata``, then the ``Node`` messages.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "ChakraProtoMsg"

#: ``NodeType`` values (et_def.proto).
NODE_TYPES = {"INVALID_NODE": 0, "METADATA_NODE": 1, "MEM_LOAD_NODE": 2, "MEM_STORE_NODE": 3, "COMP_NODE": 4,
              "COMM_SEND_NODE": 5, "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7, "STORAGE_NODE": 8, "BATCH_NODE": 9,
              "CHECKPOINT_NODE": 10}
#: ``CollectiveCommType`` values (et_def.proto).
COLLECTIVE_TYPES = {"ALL_REDUCE": 0, "REDUCE": 1, "ALL_GATHER": 2, "GATHER": 3, "SCATTER": 4, "BROADCAST": 5,
                    "ALL_TO_ALL": 6, "REDUCE_SCATTER": 7, "REDUCE_SCATTER_BLOCK": 8, "BARRIER": 9}
#: ``CollectiveCommType`` -> netsim op (``GATHER`` and ``SCATTER`` have none).
COMM_OPS = {"ALL_REDUCE": "allreduce", "REDUCE": "reduce", "ALL_GATHER": "allgather", "BROADCAST": "broadcast",
            "ALL_TO_ALL": "alltoall", "REDUCE_SCATTER": "reduce_scatter", "REDUCE_SCATTER_BLOCK": "reduce_scatter",
            "BARRIER": "allreduce"}

_F = descriptor_pb2.FieldDescriptorProto
#: The typed values of ``AttributeProto``, in field order: ``<name>_val`` is field 3 + 2i and
#: ``<name>_list`` (a ``<Name>List`` message of ``repeated values = 1``) field 4 + 2i.
_ATTR_TYPES = (("double", _F.TYPE_DOUBLE), ("float", _F.TYPE_FLOAT), ("int32", _F.TYPE_INT32),
               ("int64", _F.TYPE_INT64), ("uint32", _F.TYPE_UINT32), ("uint64", _F.TYPE_UINT64),
               ("sint32", _F.TYPE_SINT32), ("sint64", _F.TYPE_SINT64), ("fixed32", _F.TYPE_FIXED32),
               ("fixed64", _F.TYPE_FIXED64), ("sfixed32", _F.TYPE_SFIXED32), ("sfixed64", _F.TYPE_SFIXED64),
               ("bool", _F.TYPE_BOOL), ("string", _F.TYPE_STRING), ("bytes", _F.TYPE_BYTES))


def _field(msg, name: str, number: int, ftype: int, *, repeated: bool = False, type_name: str | None = None,
           oneof: int | None = None) -> None:
    f = msg.field.add(name=name, number=number, type=ftype,
                      label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
    if type_name:
        f.type_name = f".{PACKAGE}.{type_name}"
    if oneof is not None:
        f.oneof_index = oneof


def _file() -> descriptor_pb2.FileDescriptorProto:
    """et_def.proto as a descriptor (the subset netsim reads and writes)."""
    fd = descriptor_pb2.FileDescriptorProto(name="netsim_chakra_et_def.proto", package=PACKAGE, syntax="proto3")
    attr = fd.message_type.add(name="AttributeProto")
    _field(attr, "name", 1, _F.TYPE_STRING)
    _field(attr, "doc_string", 2, _F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for i, (name, ftype) in enumerate(_ATTR_TYPES):
        list_name = f"{name.capitalize()}List"
        lst = fd.message_type.add(name=list_name)
        _field(lst, "values", 1, ftype, repeated=True)
        _field(attr, f"{name}_val", 3 + 2 * i, ftype, oneof=0)
        _field(attr, f"{name}_list", 4 + 2 * i, _F.TYPE_MESSAGE, type_name=list_name, oneof=0)
    meta = fd.message_type.add(name="GlobalMetadata")
    _field(meta, "version", 1, _F.TYPE_STRING)
    _field(meta, "attr", 2, _F.TYPE_MESSAGE, repeated=True, type_name="AttributeProto")
    for enum_name, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COLLECTIVE_TYPES)):
        enum = fd.enum_type.add(name=enum_name)
        for value_name, number in values.items():
            enum.value.add(name=value_name, number=number)
    io = fd.message_type.add(name="IOInfo")
    for number, name in enumerate(("values", "shapes", "types"), start=1):
        _field(io, name, number, _F.TYPE_STRING)
    node = fd.message_type.add(name="Node")
    _field(node, "id", 1, _F.TYPE_UINT64)
    _field(node, "name", 2, _F.TYPE_STRING)
    _field(node, "type", 3, _F.TYPE_ENUM, type_name="NodeType")
    _field(node, "ctrl_deps", 4, _F.TYPE_UINT64, repeated=True)
    _field(node, "data_deps", 5, _F.TYPE_UINT64, repeated=True)
    _field(node, "start_time_micros", 6, _F.TYPE_UINT64)
    _field(node, "duration_micros", 7, _F.TYPE_UINT64)
    _field(node, "inputs", 8, _F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "outputs", 9, _F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "attr", 10, _F.TYPE_MESSAGE, repeated=True, type_name="AttributeProto")
    return fd


def _classes() -> dict[str, type]:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file())
    names = ("AttributeProto", "GlobalMetadata", "Node", "IOInfo") + tuple(
        f"{n.capitalize()}List" for n, _ in _ATTR_TYPES)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{n}")) for n in names}


_CLASSES = _classes()
AttributeProto = _CLASSES["AttributeProto"]
GlobalMetadata = _CLASSES["GlobalMetadata"]
Node = _CLASSES["Node"]


def attr_value(attr):
    """The Python value of an ``AttributeProto`` (a list for the ``*_list`` kinds; None when unset)."""
    which = attr.WhichOneof("value")
    if which is None:
        return None
    value = getattr(attr, which)
    return list(value.values) if which.endswith("_list") else value


def make_attr(name: str, value, kind: str | None = None):
    """An ``AttributeProto`` named ``name``; ``kind`` picks the field (``int64_val``, ``string_val``, ...;
    default by Python type: bool, int64, double, string, or their ``*_list``)."""
    attr = AttributeProto(name=name)
    if kind is None:
        probe = value[0] if isinstance(value, (list, tuple)) and value else value
        base = "bool" if isinstance(probe, bool) else "int64" if isinstance(probe, int) else \
            "double" if isinstance(probe, float) else "string"
        kind = f"{base}_list" if isinstance(value, (list, tuple)) else f"{base}_val"
    if kind.endswith("_list"):
        getattr(attr, kind).values.extend(value)
    else:
        setattr(attr, kind, value)
    return attr


# ---------------------------------------------------------------------------------- framing
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def encode_stream(messages: Iterable) -> bytes:
    """Messages framed as an ET file: each one's varint length, then its bytes."""
    parts = []
    for m in messages:
        data = m.SerializeToString()
        parts += [_varint(len(data)), data]
    return b"".join(parts)


class FramingError(ValueError):
    """An ET file's framing is broken (a length runs past the end, an over-long varint)."""


def split_stream(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(offset, message bytes)`` of each length-delimited message in ``data``."""
    pos, end = 0, len(data)
    while pos < end:
        start, length, shift = pos, 0, 0
        while True:
            if pos >= end or shift > 63:
                raise FramingError(f"a message length at byte {start} is cut off or too long")
            byte = data[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if pos + length > end:
            raise FramingError(f"the message at byte {start} claims {length:,} bytes, but only {end - pos:,} remain")
        yield start, data[pos:pos + length]
        pos += length


# ---------------------------------------------------------------------------------- writing
def comp_node(node_id: int, duration_micros: int, deps: Sequence[int] = (), name: str = "", **attrs):
    """A ``COMP_NODE`` (``attrs``: e.g. ``num_ops=...``)."""
    return _node(node_id, "COMP_NODE", deps, name or f"comp{node_id}", duration_micros, attrs)


def coll_node(node_id: int, op: str, size_bytes: int, deps: Sequence[int] = (), pg_name: str = "", name: str = ""):
    """A ``COMM_COLL_NODE``: ``op`` a ``CollectiveCommType`` name (``ALL_REDUCE``) or a netsim op (``allreduce``)."""
    names = {v: k for k, v in COMM_OPS.items() if k not in ("BARRIER", "REDUCE_SCATTER_BLOCK")}
    comm_type = COLLECTIVE_TYPES[names.get(op, op)]
    attrs = {"comm_type": comm_type, "comm_size": int(size_bytes)}
    if pg_name:
        attrs["pg_name"] = pg_name
    return _node(node_id, "COMM_COLL_NODE", deps, name or f"{op}{node_id}", 0, attrs)


def send_node(node_id: int, src: int, dst: int, size_bytes: int, tag: int = 0, deps: Sequence[int] = (),
              name: str = ""):
    """A ``COMM_SEND_NODE`` of ``size_bytes`` from rank ``src`` to ``dst``."""
    attrs = {"comm_src": ("int32_val", src), "comm_dst": ("int32_val", dst), "comm_tag": ("int32_val", tag),
             "comm_size": int(size_bytes)}
    return _node(node_id, "COMM_SEND_NODE", deps, name or f"send{node_id}", 0, attrs)


def recv_node(node_id: int, src: int, dst: int, size_bytes: int, tag: int = 0, deps: Sequence[int] = (),
              name: str = ""):
    """A ``COMM_RECV_NODE`` on rank ``dst`` of the message from ``src``."""
    attrs = {"comm_src": ("int32_val", src), "comm_dst": ("int32_val", dst), "comm_tag": ("int32_val", tag),
             "comm_size": int(size_bytes)}
    return _node(node_id, "COMM_RECV_NODE", deps, name or f"recv{node_id}", 0, attrs)


def _node(node_id, type_name, deps, name, duration_micros, attrs):
    node = Node(id=node_id, name=name, type=NODE_TYPES[type_name], duration_micros=int(duration_micros))
    node.ctrl_deps.extend(int(d) for d in deps)
    for key, value in attrs.items():
        kind, value = value if isinstance(value, tuple) else (None, value)
        node.attr.append(make_attr(key, value, kind))
    return node


def write_trace(prefix: str | os.PathLike, ranks_nodes: Sequence[Sequence], version: str = "0.0.4") -> list[Path]:
    """Write one ``<prefix>.<rank>.et`` per entry of ``ranks_nodes`` (that rank's ``Node`` messages, as
    made by :func:`comp_node`, :func:`coll_node`, :func:`send_node`, :func:`recv_node`, or any
    ``chakra_proto.Node``); returns the files.

    Examples
    --------
    >>> import tempfile
    >>> from netsim.workload.chakra import read_trace
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = write_trace(f"{d}/t", [[comp_node(0, 5), coll_node(1, "allreduce", 1 << 20, deps=[0])]] * 2)
    ...     trace = read_trace(f"{d}/t")
    >>> trace.ranks, [n.type_name for n in trace.nodes[1]], trace.nodes[0][1].attrs["comm_size"]
    (2, ['COMP_NODE', 'COMM_COLL_NODE'], 1048576)
    """
    meta = GlobalMetadata(version=version)
    meta.attr.append(make_attr("schema", "netsim"))
    files = []
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    for rank, nodes in enumerate(ranks_nodes):
        f = Path(f"{prefix}.{rank}.et")
        f.write_bytes(encode_stream([meta, *nodes]))
        files.append(f)
    return files
