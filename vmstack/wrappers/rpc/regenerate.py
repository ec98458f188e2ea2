"""Regenerate the ``*_pb2.py`` and ``*_pb2.pyi`` modules from the ``.proto`` files here.

Run ``python -m vmstack.wrappers.rpc.regenerate`` after changing a ``.proto`` file (it needs
``grpcio-tools`` and ``mypy-protobuf``, part of the ``test`` extra; the typed stubs come from
mypy-protobuf, whose stubs pass strict mypy). The generated modules are committed, so
nothing is generated when the package is installed; a test compares each committed
descriptor with the one its ``.proto`` compiles to and fails when they differ.

The files: ``vm.proto`` (avalanchego's ``vm.VM``), ``runtime.proto`` (``vm.runtime``),
``metrics.proto`` (Prometheus's ``io.prometheus.client``, which ``vm.proto`` imports),
``appsender.proto`` (avalanchego's ``appsender.AppSender``, which a plugin calls on the node),
``vmstack.proto`` (vmstack's extras) and ``vmstack/gossip/sdk.proto`` (avalanchego's
``sdk`` gossip messages, beside the gossip package that uses them).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

__all__ = ["PROTOS", "ROOT", "compile_descriptor", "main"]

#: The folder the proto paths are relative to (the one holding the ``vmstack`` package).
ROOT = Path(__file__).resolve().parents[3]
#: The proto files, relative to :data:`ROOT`, each generating ``NAME_pb2`` beside itself.
PROTOS = (
    "vmstack/wrappers/rpc/metrics.proto",
    "vmstack/wrappers/rpc/vm.proto",
    "vmstack/wrappers/rpc/runtime.proto",
    "vmstack/wrappers/rpc/appsender.proto",
    "vmstack/wrappers/rpc/vmstack.proto",
    "vmstack/gossip/sdk.proto",
)


def _protoc(*arguments: str) -> None:
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    status = protoc.main(["grpc_tools.protoc", f"-I{ROOT}", f"-I{well_known}", *arguments, *PROTOS])
    if status != 0:
        raise RuntimeError(f"protoc failed on {', '.join(PROTOS)} (status {status})")


def compile_descriptor(proto: str) -> bytes:
    """The serialized ``FileDescriptorProto`` that ``proto`` (one of :data:`PROTOS`)
    compiles to now, as the generated module embeds it (without the JSON field names,
    which it leaves out)."""
    from google.protobuf import descriptor_pb2

    with tempfile.TemporaryDirectory() as temporary:
        out = Path(temporary) / "all.desc"
        _protoc(f"--descriptor_set_out={out}")
        descriptor_set = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    (only,) = [file for file in descriptor_set.file if file.name == proto]
    messages = list(only.message_type)
    while messages:
        message = messages.pop()
        for field in message.field:
            field.ClearField("json_name")
        messages.extend(message.nested_type)
    return only.SerializeToString()


def main() -> int:
    """Write ``NAME_pb2.py`` and ``NAME_pb2.pyi`` beside each proto file."""
    plugin = shutil.which("protoc-gen-mypy")
    if plugin is None:
        raise RuntimeError("protoc-gen-mypy not found: pip install mypy-protobuf")
    _protoc(f"--plugin=protoc-gen-mypy={plugin}", f"--python_out={ROOT}", f"--mypy_out={ROOT}")
    print(f"regenerated from {', '.join(PROTOS)} under {ROOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
