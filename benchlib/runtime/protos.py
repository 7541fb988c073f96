"""Protocol Buffers messages from a ``.proto`` file, for gRPC endpoints: build a request
message from its JSON form, decode a response message to compare it field by field.

A ``.proto`` file is compiled at load time with ``grpcio-tools``' bundled ``protoc`` into a
descriptor set (no generated code is written anywhere), and its messages are made with
``protobuf``'s message factory. JSON follows protobuf's JSON mapping (``json_format``: the
field names as written in the ``.proto`` or in lowerCamelCase).
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

from benchlib.core.errors import ParameterError

__all__ = ["message_type", "encode_json", "decode_to_dict"]


@functools.lru_cache(maxsize=32)
def _pool(proto: Path, mtime_ns: int) -> Any:
    """A descriptor pool holding ``proto`` and its imports (compiled with grpc_tools' protoc)."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    from grpc_tools import protoc

    try:
        import importlib.resources as resources

        include = str(resources.files("grpc_tools") / "_proto")
    except (ImportError, TypeError):  # pragma: no cover
        include = ""
    with tempfile.TemporaryDirectory(prefix="benchlib-proto-") as tmp:
        out = Path(tmp) / "set.pb"
        args = ["protoc", f"-I{proto.parent}", *([f"-I{include}"] if include else []),
                f"--descriptor_set_out={out}", "--include_imports", str(proto)]
        rc = protoc.main(args)
        if rc != 0 or not out.is_file():
            raise ParameterError(f"{proto}: protoc could not compile it (exit code {rc}); check the .proto's syntax")
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    return pool


def message_type(proto: str | Path, name: str) -> Any:
    """The message class ``name`` (fully qualified, e.g. ``pkg.SmallRequest``) of ``proto``."""
    from google.protobuf import message_factory

    path = Path(proto).absolute()
    if not path.is_file():
        raise ParameterError(f"no .proto file {path}")
    pool = _pool(path, path.stat().st_mtime_ns)
    try:
        desc = pool.FindMessageTypeByName(name)
    except KeyError:
        raise ParameterError(f"{path} has no message {name!r} (give its full name, package included)") from None
    return message_factory.GetMessageClass(desc)


def encode_json(proto: str | Path, name: str, data: str | dict[str, Any]) -> bytes:
    """The serialized message ``name`` of ``proto`` whose JSON form is ``data`` (a JSON text
    or a dict); an unknown field or a wrong type is a :class:`ParameterError`."""
    from google.protobuf import json_format

    cls = message_type(proto, name)
    text = data if isinstance(data, str) else json.dumps(data)
    try:
        msg = json_format.Parse(text, cls())
    except json_format.ParseError as exc:
        raise ParameterError(f"{name} from {text[:80]!r}: {' '.join(str(exc).split())}") from None
    return bytes(msg.SerializeToString(deterministic=True))


def decode_to_dict(proto: str | Path, name: str, data: bytes) -> dict[str, Any]:
    """Message ``name`` of ``proto`` parsed from ``data``, as its JSON form (a dict, field
    names as in the ``.proto``, default values included)."""
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError

    cls = message_type(proto, name)
    try:
        msg = cls.FromString(data)
    except DecodeError as exc:
        raise ParameterError(f"{len(data)} bytes are not a {name} message: {' '.join(str(exc).split())}") from None
    out: dict[str, Any] = json_format.MessageToDict(msg, preserving_proto_field_name=True,
                                                    always_print_fields_with_no_presence=True)
    return out
