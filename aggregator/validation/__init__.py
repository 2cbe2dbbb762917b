"""Validation: the check catalog's runs across the cluster, their results and reports.

Deployment checks are decided in the aggregator; node checks go out through the agents'
streams (RunChecks) and come back as CheckResult messages. No web, CLI or gRPC server code.
"""

from plumb.aggregator.validation.model import CheckResult, PlannedCheck, ValidationRun
from plumb.aggregator.validation.orchestrator import Validator
from plumb.aggregator.validation.reports import ctrf, junit, result_json, run_json
from plumb.aggregator.validation.wire import AgentResult, agent_result

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
