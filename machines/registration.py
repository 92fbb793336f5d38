"""Plugin registration through kubelet's plugin watcher, one model per socket (wire.md §8.1).

1. **not_serving**: no socket yet. The socket is created only once the state is recovered and
   the actors are ready (guard ``actors_ready``), because kubelet dials as soon as the file
   appears and asks ``GetResourcePluginOptions`` once.
2. **serving**: the stale file is removed and the gRPC server listens on
   ``<dir>/qrm_cpu_plugin_dynamic.sock``; kubelet finds it, calls ``GetInfo`` and registers.
3. **registered**: kubelet called ``NotifyRegistrationStatus(plugin_registered=true)``. A
   kubelet restart re-registers existing sockets, so a second ``true`` keeps this state.
4. **recreating_socket**: kubelet reported ``plugin_registered=false``. It has recorded the
   socket as registered and will not retry until the file is created anew, so qrmd tears the
   socket down and creates it again (the fix wire.md §8.1 recommends; the reference only logs).
   The same path restarts a server whose serving failed (the reference retries every 5 s).
5. **deregistered**: on stop the socket file is removed, which makes kubelet deregister.

The eviction plugin's registration with katalyst-agent (wire.md §8.3, memory-balancer.md §10)
follows the same machine. Registration holds no persistent state: nothing is journaled.
"""

from __future__ import annotations

from functools import cache

from machines.lifecycle import Lifecycle
from machines.table import MachineTable, Transition

NOT_SERVING = "not_serving"
SERVING = "serving"
REGISTERED = "registered"
RECREATING_SOCKET = "recreating_socket"
DEREGISTERED = "deregistered"

# fmt: off
TRANSITIONS = (
    Transition("serve", (NOT_SERVING,), SERVING, conditions=("actors_ready",),
               actions=("create_socket",)),
    Transition("registration_accepted", (SERVING, REGISTERED), REGISTERED),
    Transition("registration_rejected", (SERVING, REGISTERED), RECREATING_SOCKET,
               actions=("remove_socket", "create_socket")),
    Transition("serving_failed", (SERVING, REGISTERED), RECREATING_SOCKET,
               actions=("remove_socket", "create_socket")),
    Transition("socket_recreated", (RECREATING_SOCKET,), SERVING),
    Transition("stop", (NOT_SERVING, SERVING, REGISTERED, RECREATING_SOCKET), DEREGISTERED,
               actions=("remove_socket",)),
)
# fmt: on

TABLE = MachineTable(
    name="registration",
    title="Plugin registration with kubelet",
    states=(NOT_SERVING, SERVING, REGISTERED, RECREATING_SOCKET, DEREGISTERED),
    initial=NOT_SERVING,
    final=(DEREGISTERED,),
    transitions=TRANSITIONS,
    glossary=(
        ("actors_ready", "the state is recovered from the journal and the actors answer"),
        (
            "create_socket",
            "remove a stale file, listen owner-only on the socket and serve both services",
        ),
        ("remove_socket", "stop the server and delete the socket file"),
    ),
    summary=(
        "One plugin socket and its registration through kubelet's plugin watcher (wire.md "
        "§8.1, §8.3): serve once ready, registered when kubelet says so, socket re-created "
        "when kubelet reports plugin_registered=false, deregistered by removing the socket "
        "on stop."
    ),
)


@cache
def lifecycle() -> Lifecycle:
    """The registration machine every plugin socket shares."""
    return Lifecycle(TABLE)
