"""A sys-advisor simulator: Katalyst's CPU advisor over real gRPC on a unix socket, for the demo,
tests and benchmarks (wire.md §6, §10; cpu-policy §11).

``SysAdvisorSimulator`` serves ``cpuadvisor.CPUAdvisor`` on its socket: it learns containers
from ``AddContainer``/``RemovePod`` and reads qrmd's ``GetCheckpoint`` every period, as the real
one does, sizes the pools from a simple load model (``model``) and streams the result. Fault
modes (``faults``) make it refuse, stall, drop its stream, answer slowly, send each kind of
invalid response, or flap.
"""

from qrmd.sim.advisor.faults import INVALID_KINDS, Fault
from qrmd.sim.advisor.model import LoadModel, SimNode, plan_response
from qrmd.sim.advisor.simulator import SysAdvisorSimulator

__all__ = ["INVALID_KINDS", "Fault", "LoadModel", "SimNode", "SysAdvisorSimulator", "plan_response"]
