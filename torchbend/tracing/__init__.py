"""Tracing: torch.fx symbolic tracing doubled with concrete execution."""

from .facts import Fact, fact_reader, kind_of, signature_of
from .flow import DecisionChanged, FlowStep, check_decision, is_guard
from .objects import rebuild_object
from .proxy import ConcreteAttribute, ConcreteProxy
from .records import NodeRecord, TracedGraph, record_of
from .tensordict import is_tensordict
from .tracer import BendingTracer

__all__ = [
    "BendingTracer",
    "ConcreteAttribute",
    "ConcreteProxy",
    "DecisionChanged",
    "Fact",
    "FlowStep",
    "NodeRecord",
    "TracedGraph",
    "check_decision",
    "fact_reader",
    "is_guard",
    "is_tensordict",
    "kind_of",
    "rebuild_object",
    "record_of",
    "signature_of",
]
