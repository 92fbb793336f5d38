"""The node's persistent state and its events (spec cpu-policy §5, DESIGN.md "Journal").

* ``sections``: ``State`` (one immutable section per owner) and the one pure ``apply``;
* ``entries``: container entries and their placement (in a pool, ramping, own CPUs);
* ``identity``: who a container is (``ContainerIdentity``, ``ContainerType``), one value from
  request to reply, flat in stored entries;
* ``cpu_state``, ``cpu_indexes``: the CPU section and its incrementally kept indexes;
* ``events``: the closed vocabulary of CPU events; ``cpu_apply``: how they apply;
* ``machine_state``: the per-NUMA machine state derived from the CPU section (§5.4);
* ``pool_pods``: the pods in the pools and each pool's NUMA list, the memory balancer's
  view of the CPU section (memory-balancer §4.5);
* ``codec``: events and states as msgpack-able primitives (journal records, checkpoints);
  ``codec_fast``: its one-pass decoding of well-formed CPU events and entries (replay);
  ``checkpoint_form``: how a checkpoint writes the containers (columns, or entry maps for a
  rollback).

Imports ``policy.topology`` and ``policy.balance`` (for the balance section it holds), never
``policy.cpu``: the state knows nothing of how decisions are made.
"""
