"""Node-local health checks and benchmarks the aggregator asks for over the stream.

One module per check family: `conformance` (GPU health from NVML facts and a PCI scan),
`performance` (matmul, memory and host-device bandwidth, NCCL all-reduce), `nccl_tests`
(running and parsing nccl-tests). `runner` runs one check with a timeout off the event loop.
Each check is a plain function `(CheckContext, params) -> Outcome`; nothing here knows the
aggregator, the GPU catalog or thresholds: benchmarks report what they measured and the
aggregator grades it against the GPU's peak.
"""

from plumb.agent.checks.model import CheckContext, Outcome
from plumb.agent.checks.runner import CHECKS, CheckRunner

__all__ = ["CHECKS", "CheckContext", "CheckRunner", "Outcome"]
