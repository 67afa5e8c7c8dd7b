"""Tracing: torch.fx symbolic tracing doubled with concrete execution."""

from .facts import Fact, fact_reader, signature_of
from .flow import DecisionChanged, FlowStep, check_decision
from .proxy import ConcreteAttribute, ConcreteProxy
from .tensordict import is_tensordict
from .tracer import BendingTracer, TraceResult, rebuild_object

__all__ = [
    "BendingTracer",
    "ConcreteAttribute",
    "ConcreteProxy",
    "DecisionChanged",
    "Fact",
    "FlowStep",
    "TraceResult",
    "check_decision",
    "fact_reader",
    "is_tensordict",
    "rebuild_object",
    "signature_of",
]
