"""Validation: the check catalog's runs across the cluster, their results and reports.

Deployment checks are decided in the aggregator; node checks go out through the agents'
streams (RunChecks) and come back as CheckResult messages. No web, CLI or gRPC server code.
"""

from aggregator.validation.model import CheckResult, PlannedCheck, ValidationRun
from aggregator.validation.orchestrator import Validator
from aggregator.validation.reports import ctrf, junit, result_json, run_json
from aggregator.validation.wire import AgentResult, agent_result

__all__ = [
    "AgentResult",
    "CheckResult",
    "PlannedCheck",
    "ValidationRun",
    "Validator",
    "agent_result",
    "ctrf",
    "junit",
    "result_json",
    "run_json",
]
