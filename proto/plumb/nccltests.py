"""nccl-tests output from any launcher, as runs: what ran where, its figures and its verdict.

Pure: the text in, frozen data out. Shared by the agent (its NCCL check runs all_reduce_perf)
and the aggregator (`plumb nccl FILE`, POST /v1/benchmarks), which must not import each other.

Read as printed by nccl-tests (src/util.cu, src/common.cu): the preamble (`# nccl-tests
version`, `# Collective test starting`, `# nThread … nGpus …`, the `#  Rank N … on HOST device
D [PCI] MODEL` lines), the table (with or without the `redop` and `root` columns, `N/A` when
validation is off, the per-iteration columns of newer versions) and the footer; or the `-J`
JSON report. Launchers' line prefixes (srun `N: `, Open MPI `[r,n]<stdout>:`, `[N]`, pdsh
`host: `, log timestamps) are stripped; NCCL INFO/WARN and MPI lines between are skipped.
Several runs in one file are split, each judged alone. A run is `ok` only with rows and a
footer and no wrong value: a truncated or hung run is `incomplete`, never a pass.

The headline figure is the out-of-place bus bandwidth at the largest size, never the footer's
average, which mixes every size and both placements. Bandwidths are GB/s, GB = 1e9 bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "NcclNode",
    "NcclRow",
    "NcclRun",
    "Status",
    "parse",
    "parse_json",
    "parse_text",
    "summary",
]

Status = Literal["ok", "failed", "incomplete"]

# The collectives nccl-tests builds, as `<name>_perf` binaries.
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "alltoall",
    "broadcast",
    "gather",
    "hypercube",
    "reduce",
    "reduce_scatter",
    "scatter",
    "sendrecv",
)
# Bytes per element of nccl-tests' `-d` types: the size column is count x this (x ranks for
# all_gather and reduce_scatter, whose count is per rank).
_TYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "char": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "half": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "int": 4,
    "float": 4,
    "int64": 8,
    "uint64": 8,
    "double": 8,
}

_PREFIX = re.compile(
    r"^(?:\d+:\s"  # srun --label
    r"|\[[^\]\s]*\](?:<std(?:out|err)>)?:?\s?"  # [1,0]<stdout>: (Open MPI), [0], [default0]:
    r"|\d{4}-\d\d-\d\dT[\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\s"  # a log timestamp
    r"|[\w.-]+:\s)"  # pdsh / clush `host: `
)
_TAG = re.compile(r"\[\d+(?:,\d+)?\](?:<std(?:out|err)>:)?")  # tags mpirun splices mid-line
_RANK = re.compile(
    r"Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+"
    r"\[([^\]]*)\]\s+(.*?)\s*$"
)
_CONFIG = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_VALIDATION = re.compile(r"validation:\s*(\d+)")
_VERSION = re.compile(r"nccl-tests version\s+(\S+)(?:.*?nccl-library=(\d+))?")
_NCCL_VERSION = re.compile(r"NCCL version\s+(\d+\.\d+\.\d+\S*)")
_STARTING = re.compile(r"Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"Collective test concluded")
_OOB = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_FAILURE = re.compile(r"Test (?:NCCL|CUDA) failure.*")  # common.h's NCCLCHECK / CUDACHECK
_ERROR = re.compile(r"error:\s*.+")  # `# error: …`, NCCL's last error at exit
_NAMES = "|".join(COLLECTIVES)
# A command line naming the binary, or a wrapper's `-t NAME`.
_COMMAND = re.compile(rf"\b({_NAMES})_perf\b|\s-t\s+({_NAMES})\b")
_ELISION = re.compile(r"^(?:\.{3,}|…|\[\.\.\.\])$")


@dataclass(frozen=True)
class NcclRow:
    """One message size: bus bandwidth and wrong elements, out of place and in place.

    `wrong_*` is None where the log has no count: validation off (`N/A`), or the old `error`
    column, which held the largest error rather than a count.
    """

    size_bytes: int
    count: int
    type: str
    redop: str | None
    root: int | None
    busbw_out_gbps: float | None
    busbw_in_gbps: float | None
    wrong_out: int | None = None
    wrong_in: int | None = None

    @property
    def wrong(self) -> int | None:
        """Wrong elements over both placements, None when neither was counted."""
        known = [w for w in (self.wrong_out, self.wrong_in) if w is not None]
        return sum(known) if known else None


@dataclass(frozen=True)
class NcclNode:
    """One host of a run: its ranks, the CUDA devices they used and the GPU model."""

    host: str
    ranks: tuple[int, ...]
    devices: tuple[int, ...]
    model: str | None

    @property
    def gpus(self) -> int:
        return len(self.devices)


@dataclass(frozen=True)
class NcclRun:
    """One nccl-tests run: what, where, the rows in size order, the footer, the verdict."""

    collective: str | None
    ranks: int | None
    nodes: tuple[NcclNode, ...]
    nccl_version: str | None
    nccl_tests_version: str | None
    rows: tuple[NcclRow, ...]
    avg_busbw_gbps: float | None
    out_of_bounds: int | None
    validation: bool | None
    elided: bool
    errors: tuple[str, ...]
    status: Status
    reasons: tuple[str, ...]

    @property
    def largest(self) -> NcclRow | None:
        return max(self.rows, key=lambda r: r.size_bytes, default=None)

    @property
    def busbw_gbps(self) -> float | None:
        """Out-of-place busbw at the largest size (in place where out of place is absent)."""
        row = self.largest
        if row is None:
            return None
        return row.busbw_out_gbps if row.busbw_out_gbps is not None else row.busbw_in_gbps


def parse(text: str) -> tuple[NcclRun, ...]:
    """Every run in `text`: a `-J` JSON report, else nccl-tests' stdout."""
    if text.lstrip().startswith("{"):
        return (parse_json(text),)
    return parse_text(text)


def summary(run: NcclRun) -> dict:
    """A run as plain JSON: what `plumb nccl -o json` prints and the API stores as details."""
    largest = run.largest
    return {
        "collective": run.collective,
        "ranks": run.ranks,
        "nodes": [
            {"host": n.host, "gpus": n.gpus, "devices": list(n.devices), "model": n.model}
            for n in run.nodes
        ],
        "nccl_version": run.nccl_version,
        "nccl_tests_version": run.nccl_tests_version,
        "busbw_gbps": run.busbw_gbps,
        "largest_bytes": largest.size_bytes if largest is not None else None,
        "avg_busbw_gbps": run.avg_busbw_gbps,
        "rows": len(run.rows),
        "out_of_bounds": run.out_of_bounds,
        "validation": run.validation,
        "elided": run.elided,
        "status": run.status,
        "reasons": list(run.reasons),
    }


# -- text -------------------------------------------------------------------------------------


@dataclass
class _Draft:
    """A run while its lines come in."""

    markers: set[str] = field(default_factory=set)
    collective: str | None = None
    per_process: int | None = None
    devices: dict[int, tuple[str, int, str]] = field(default_factory=dict)
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    library_code: int | None = None
    columns: tuple[int, tuple[dict[str, int], ...]] | None = None
    rows: list[NcclRow] = field(default_factory=list)
    oob: int | None = None
    avg: float | None = None
    failed_footer: list[str] = field(default_factory=list)
    validation: bool | None = None
    elided: bool = False
    concluded: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def closed(self) -> bool:
        """Rows or a footer are in: a new preamble or table starts another run."""
        return bool(self.rows) or self.oob is not None or self.avg is not None or self.concluded


def _clean(raw: str) -> str:
    line = raw.rstrip("\r\n")
    for _ in range(3):
        m = _PREFIX.match(line.lstrip())
        if m is None:
            break
        line = line.lstrip()[m.end() :]
    return _TAG.sub(" ", line).strip()


def parse_text(text: str) -> tuple[NcclRun, ...]:
    """The runs in nccl-tests' stdout, in order; lines outside any run are ignored."""
    drafts: list[_Draft] = []

    def current(opens: str | None = None) -> _Draft:
        """The run a line belongs to; a new one when `opens` starts a run past this one."""
        if not drafts or (opens is not None and (drafts[-1].closed or opens in drafts[-1].markers)):
            drafts.append(_Draft(columns=drafts[-1].columns if drafts else None))
        if opens is not None:
            drafts[-1].markers.add(opens)
        return drafts[-1]

    for raw in text.splitlines():
        line = _clean(raw)
        if not line:
            continue
        body = line.lstrip("#").strip()
        columns = drafts[-1].columns if drafts else None
        if (row := _row(line.split(), columns)) is not None:
            fresh = not drafts or _footer_seen(drafts[-1])  # rows after a footer: another run
            (current("rows") if fresh else drafts[-1]).rows.append(row)
        elif m := _VERSION.search(body):
            run = current("version")
            run.nccl_tests_version = m.group(1)
            run.library_code = int(m.group(2)) if m.group(2) else None
        elif m := _STARTING.search(body):
            current("starting").collective = _collective(m.group(1))
        elif m := _CONFIG.search(body):
            run = current("config")
            run.per_process = int(m.group(1)) * int(m.group(2))
            if v := _VALIDATION.search(body):
                run.validation = v.group(1) != "0"
        elif m := _RANK.search(body):
            run = current("devices") if drafts and drafts[-1].closed else current()
            run.devices[int(m.group(1))] = (m.group(2), int(m.group(3)), m.group(5))
        elif body.startswith("size") and "busbw" in body:
            current("table").columns = _columns(body.split())
        elif m := _OOB.search(body):
            run = current()
            run.oob = int(m.group(1))
            if m.group(2) == "FAILED":
                run.failed_footer.append(f"out of bounds values: {m.group(1)}")
        elif m := _AVG.search(body):
            run = current()
            run.avg = _float(m.group(1))
            if m.group(2) == "FAILED":
                run.failed_footer.append(f"average bus bandwidth {m.group(1)} below the -c check")
        elif _CONCLUDED.search(body):
            current().concluded = True
        elif (m := _FAILURE.search(body)) or (line.startswith("#") and (m := _ERROR.match(body))):
            current().errors.append(m.group(0)[:300])
        elif _ELISION.match(body):
            current().elided = True
        elif drafts and (m := _NCCL_VERSION.search(line)):
            drafts[-1].nccl_version = drafts[-1].nccl_version or m.group(1)
        elif not line.startswith("#") and (m := _COMMAND.search(line)):
            run = current("command")
            run.collective = run.collective or m.group(1) or m.group(2)
    return tuple(_finish(d) for d in drafts)


def _footer_seen(run: _Draft) -> bool:
    return run.oob is not None or run.avg is not None or run.concluded


def _collective(program: str) -> str | None:
    name = program.rsplit("/", 1)[-1].removesuffix("_perf")
    return name if name in COLLECTIVES else None


def _columns(header: list[str]) -> tuple[int, tuple[dict[str, int], ...]] | None:
    """(key column count, one {name: offset} per placement) from the table's header line."""
    starts = [i for i, name in enumerate(header) if name in ("time", "cputime")]
    if not starts:
        return None
    groups = []
    for a, b in zip(starts, [*starts[1:], len(header)], strict=True):
        groups.append({name: i - a for i, name in enumerate(header[a:b], start=a)})
    return starts[0], tuple(groups)


def _row(
    tokens: list[str], columns: tuple[int, tuple[dict[str, int], ...]] | None
) -> NcclRow | None:
    """A table row, or None for anything else (NCCL's own lines, MPI's, a shell's)."""
    if len(tokens) < 7 or not (tokens[0].isdigit() and tokens[1].isdigit()):
        return None
    if not re.fullmatch(r"[a-z][a-z0-9_]*", tokens[2]):
        return None
    if columns is None:
        keys = len(tokens) - 8  # two placements of time, algbw, busbw, #wrong
        if keys not in (3, 4, 5):
            return None
        columns = (keys, ({"time": 0, "algbw": 1, "busbw": 2, "#wrong": 3},) * 2)
    keys, groups = columns
    starts, at = [], keys
    for group in groups:
        starts.append(at)
        at += len(group)
    if len(tokens) < starts[-1] + min(len(groups[-1]), 4):
        return None
    placements = []
    for start, group in zip(starts, groups, strict=True):
        busbw = _float(tokens[start + group["busbw"]]) if "busbw" in group else None
        wrong = _wrong(tokens[start + group["#wrong"]]) if "#wrong" in group else None
        placements.append((busbw, wrong))
    if placements[0][0] is None and (len(placements) < 2 or placements[1][0] is None):
        return None
    redop = tokens[3] if keys >= 4 else None
    root = _int(tokens[4]) if keys >= 5 else None
    out, inp = placements[0], placements[1] if len(placements) > 1 else (None, None)
    return NcclRow(
        int(tokens[0]), int(tokens[1]), tokens[2], redop, root, out[0], inp[0], out[1], inp[1]
    )


def _wrong(token: str) -> int | None:
    value = _float(token)
    return None if value is None else int(value)


def _float(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _int(token: str) -> int | None:
    try:
        return int(token.strip())
    except ValueError:
        return None


def _nccl_code(code: int | None) -> str | None:
    """NCCL_VERSION_CODE as a version: 22102 is 2.21.2 (from 2.9, major*10000+minor*100+patch)."""
    if code is None:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _nodes(devices: dict[int, tuple[str, int, str]]) -> tuple[NcclNode, ...]:
    hosts: dict[str, list[tuple[int, int, str]]] = {}
    for rank, (host, device, model) in sorted(devices.items()):
        hosts.setdefault(host, []).append((rank, device, model))
    out = []
    for host, entries in hosts.items():
        models = sorted({m for _, _, m in entries if m})
        out.append(
            NcclNode(
                host=host,
                ranks=tuple(r for r, _, _ in entries),
                devices=tuple(sorted({d for _, d, _ in entries})),
                model=", ".join(models) or None,
            )
        )
    return tuple(out)


def _infer(rows: Iterable[NcclRow]) -> tuple[str | None, int | None]:
    """(collective, ranks) from the largest row where the log names neither.

    The size column is count x type size for all_reduce, and x ranks for all_gather and
    reduce_scatter, whose count is per rank; reducing collectives print a redop, rooted ones
    a root >= 0. Anything else stays unknown.
    """
    row = max(rows, key=lambda r: r.size_bytes, default=None)
    width = _TYPE_BYTES.get(row.type) if row is not None else None
    if row is None or width is None or row.count == 0 or row.size_bytes % (row.count * width):
        return None, None
    ratio = row.size_bytes // (row.count * width)
    reduces = row.redop not in (None, "none")
    unrooted = row.root is None or row.root < 0
    if not unrooted:
        return None, None
    if reduces and ratio == 1:
        return "all_reduce", None
    if ratio > 1:
        return ("reduce_scatter" if reduces else "all_gather"), ratio
    return None, None


def _finish(d: _Draft) -> NcclRun:
    rows = tuple(sorted(d.rows, key=lambda r: r.size_bytes))
    guessed, ratio_ranks = _infer(rows)
    collective = d.collective or guessed
    ranks: int | None = None
    if d.devices or d.per_process:
        ranks = max(len(d.devices), d.per_process or 0)  # the header's count is per process
    elif collective == guessed:
        ranks = ratio_ranks
    wrong = sum(r.wrong or 0 for r in rows)
    failed = [*d.failed_footer, *d.errors]
    if wrong and not d.oob:
        failed.append(f"{wrong} wrong values in the rows")
    missing = []
    if not rows:
        missing.append("no result rows (the run hung or was cut before its table)")
    elif not _footer_seen(d):
        missing.append("no footer (the run did not finish, or the log is cut)")
    status: Status = "failed" if failed else "incomplete" if missing else "ok"
    return NcclRun(
        collective=collective,
        ranks=ranks,
        nodes=_nodes(d.devices),
        nccl_version=d.nccl_version or _nccl_code(d.library_code),
        nccl_tests_version=d.nccl_tests_version,
        rows=rows,
        avg_busbw_gbps=d.avg,
        out_of_bounds=d.oob,
        validation=d.validation,
        elided=d.elided,
        errors=tuple(d.errors),
        status=status,
        reasons=tuple(failed + missing),
    )


# -- JSON (-J) --------------------------------------------------------------------------------


def parse_json(text: str) -> NcclRun:
    """The report `<collective>_perf -J FILE` writes (version 2 of its layout)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        why = "the JSON report is cut off: the run did not finish, or the file is truncated"
        return _empty_json(why)
    if not isinstance(doc, dict):
        return _empty_json("the JSON report is not an object")
    config = doc.get("config") or {}
    per_process = int(config.get("nthreads", 1)) * int(config.get("ngpus", 1))
    # One entry per process, its first rank's line: its ranks follow on consecutive devices.
    devices: dict[int, tuple[str, int, str]] = {}
    for entry in config.get("devices") or []:
        for i in range(per_process):
            rank, device = int(entry["rank"]) + i, int(entry["device"]) + i
            devices[rank] = (str(entry["hostname"]), device, str(entry.get("device_info", "")))
    rows = []
    for entry in doc.get("results") or []:
        out, inp = entry.get("out_of_place") or {}, entry.get("in_place") or {}
        rows.append(
            NcclRow(
                size_bytes=int(entry["size"]),
                count=int(entry["count"]),
                type=str(entry["type"]),
                redop=entry.get("redop"),
                root=_int(str(entry.get("root", ""))),
                busbw_out_gbps=_num(out.get("bus_bw")),
                busbw_in_gbps=_num(inp.get("bus_bw")),
                wrong_out=_count(out.get("nwrong")),
                wrong_in=_count(inp.get("nwrong")),
            )
        )
    draft = _Draft(
        collective=_collective(str((doc.get("args") or [""])[0])),
        per_process=per_process if devices else None,
        devices=devices,
        library_code=doc.get("nccl_version"),
        rows=rows,
        oob=(doc.get("out_of_bounds") or {}).get("count"),
        avg=_num((doc.get("average_bus_bandwidth") or {}).get("bandwidth")),
        validation=bool(config["validation"]) if "validation" in config else None,
        errors=[str(e)[:300] for e in doc.get("errors") or [] if e],
    )
    if (draft.oob or 0) > 0:
        draft.failed_footer.append(f"out of bounds values: {draft.oob}")
    if str((doc.get("average_bus_bandwidth") or {}).get("okay")).lower() == "false":
        draft.failed_footer.append("average bus bandwidth below the -c check")
    return _finish(draft)


def _num(value: object) -> float | None:
    """A JSON figure: nccl-tests writes NaN as the string "nan"."""
    return float(value) if isinstance(value, int | float) else None


def _count(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def _empty_json(why: str) -> NcclRun:
    return NcclRun(
        None, None, (), None, None, (), None, None, None, False, (), "incomplete", (why,)
    )
