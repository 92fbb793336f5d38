"""The deterministic simulation of the node (``qrmd sim``; DESIGN.md "Subsystems and
simulation"; docs/simulation.md).

qrmd's own actors, policy, journal and wire conversion run on one thread against simulated
peers, a simulated disk and a virtual clock, with faults from a seed and named invariants
checked after every step; a seed replays exactly. One module per part:

* ``runtime``: pykka's actor, inbox and future hooks driven by a seeded scheduler;
* ``clock``: the virtual clock behind the ``Clock`` port;
* ``storage``: the disk model behind the journal's ``FileOps`` (written vs synced);
* ``node``: the qrmd process: the StateStore, Allocator and Checkers under the Supervisor;
* ``kubelet``, ``pod_source``, ``cgroups``: the peers, behind their ports;
* ``faults``, ``invariants``, ``defects``: what goes wrong, what must hold, what is planted;
* ``simulation``: the step loop and its trace; ``shrink``: a smaller failing run.

Production code never imports this package.
"""
