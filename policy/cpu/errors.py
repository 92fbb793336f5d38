"""The CPU policy's errors that belong to no single rule, and where the others live.

Each error class of the CPU policy carries its :class:`~policy.errors.ErrorKind`; most live
next to the rule that raises them:

* ``policy.cpu.request.RequestError`` and its ``policy.cpu.qos.QoSError``: a malformed
  request, an unknown or unserved QoS level (``INVALID``);
* ``policy.cpu.allocate.AllocationError`` (§7) and ``policy.cpu.hints.HintError`` (§8): a
  refused Allocate or hint (``REFUSED``, or ``SHORTAGE`` where the CPUs ran out);
* ``policy.cpu.pool_sizing.PoolError`` (§9): a pool adjustment that fails (``REFUSED``, or the
  ``SHORTAGE`` of the selection it wraps);
* ``policy.cpu.ramp_steps.RampUpError``: a ramp-up trigger the container's state does not
  allow (``REFUSED``);
* ``policy.cpu.reserve.ReserveError`` and ``policy.cpu.qos.QoSConfigError``: settings that
  stop the plugin from starting (``INVALID``, or ``SHORTAGE`` for a reserve the node cannot
  hold).

This module holds :class:`UnknownContainerError`, which any query about a container may raise.
"""

from __future__ import annotations

from policy.errors import ErrorKind, PolicyError

__all__ = ["UnknownContainerError"]


class UnknownContainerError(PolicyError):
    """A query names a container the state does not hold (kubelet gets NOT_FOUND).

    The message is the reference's, "pod: %s, container: %s is not show up in cpu plugin state"
    (spec cpu-policy §10.2).

    Attributes:
        pod_uid: the pod asked about.
        container_name: the container asked about.
    """

    kind = ErrorKind.NOT_FOUND

    def __init__(self, pod_uid: str, container_name: str) -> None:
        super().__init__(
            f"pod: {pod_uid}, container: {container_name} is not show up in cpu plugin state"
        )
        self.pod_uid = pod_uid
        self.container_name = container_name
