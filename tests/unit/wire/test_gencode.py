"""The committed plumb.v1 Python is exactly what the pinned grpcio-tools generates."""

from __future__ import annotations

from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[3]
PROTOS = ["plumb/v1/facts.proto", "plumb/v1/agent.proto"]


def test_regenerating_the_proto_code_changes_nothing(tmp_path):
    include = str(Path(protoc.__file__).parent / "_proto")
    rc = protoc.main(
        [
            "protoc",
            f"-I{ROOT / 'proto'}",
            f"-I{include}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            *PROTOS,
        ]
    )
    assert rc == 0
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.py*"))
    assert generated, "protoc produced nothing"
    stale = [
        str(rel)
        for rel in generated
        if (tmp_path / rel).read_bytes() != (ROOT / "proto" / rel).read_bytes()
    ]
    assert not stale, f"committed gencode is stale, run `make proto`: {stale}"
