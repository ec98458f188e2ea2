"""Regenerate ``vm_pb2.py`` and ``vm_pb2.pyi`` from ``vm.proto``.

Run ``python -m vmstack.wrappers.rpc.regenerate`` after changing ``vm.proto`` (it needs
``grpcio-tools`` and ``mypy-protobuf``, part of the ``test`` extra; the typed stub comes from
mypy-protobuf, whose stubs pass strict mypy). The generated modules are committed, so
nothing is generated when the package is installed; a test compares the committed
descriptor with the one ``vm.proto`` compiles to and fails when they differ.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

__all__ = ["PROTO", "ROOT", "compile_descriptor", "main"]

#: The folder the proto path is relative to (the one holding the ``vmstack`` package).
ROOT = Path(__file__).resolve().parents[3]
#: The service definition, relative to :data:`ROOT`.
PROTO = "vmstack/wrappers/rpc/vm.proto"


def _protoc(*arguments: str) -> None:
    from grpc_tools import protoc

    status = protoc.main(["grpc_tools.protoc", f"-I{ROOT}", *arguments, PROTO])
    if status != 0:
        raise RuntimeError(f"protoc failed on {PROTO} (status {status})")


def compile_descriptor() -> bytes:
    """The serialized ``FileDescriptorProto`` that ``vm.proto`` compiles to now, as the
    generated module embeds it (without the JSON field names, which it leaves out)."""
    from google.protobuf import descriptor_pb2

    with tempfile.TemporaryDirectory() as temporary:
        out = Path(temporary) / "vm.desc"
        _protoc(f"--descriptor_set_out={out}")
        descriptor_set = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    (only,) = descriptor_set.file
    messages = list(only.message_type)
    while messages:
        message = messages.pop()
        for field in message.field:
            field.ClearField("json_name")
        messages.extend(message.nested_type)
    return only.SerializeToString()


def main() -> int:
    """Write ``vm_pb2.py`` and ``vm_pb2.pyi`` beside ``vm.proto``."""
    plugin = shutil.which("protoc-gen-mypy")
    if plugin is None:
        raise RuntimeError("protoc-gen-mypy not found: pip install mypy-protobuf")
    _protoc(f"--plugin=protoc-gen-mypy={plugin}", f"--python_out={ROOT}", f"--mypy_out={ROOT}")
    print(f"regenerated from {ROOT / PROTO}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
