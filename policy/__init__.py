"""The pure domain of qrmd: the machine, the node's state, and the decisions made on it.

Nothing here touches threads, files, sockets or the clock; time and data come in as
arguments and decisions go out as values (DESIGN.md, "Every decision has one shape").

Subpackages, from the bottom up (import-linter keeps each one importing only those below it):

* ``policy.topology``: the machine — CPU sets, the CPU/NUMA topology, machine files, the
  synthetic generator and CPU selection (spec cpu-policy §1–§2).
* ``policy.balance``: the NUMA memory balancer — its round planner, its state section
  (``current``/``last``), its events and codec (spec memory-balancer).
* ``policy.state``: the node's persistent state — one section per owner (the CPU section is
  defined here, the balance section by ``policy.balance``), the CPU events, the one pure
  ``apply``, the codec of journal records and checkpoints (spec cpu-policy §5).
* ``policy.cpu``: the CPU plugin's decisions — requests, QoS, allocation, hints, pools,
  ramp-up, removal, listing, the façade the Allocator calls (spec cpu-policy §3–§10).

Modules at this level are shared by all of them and import none: ``errors`` (the error
root, the kinds of error, ``describe_container``) and ``decision`` (the ``Event`` base every
decision emits).
"""
