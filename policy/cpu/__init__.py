"""The CPU plugin's decisions: the dynamic policy (spec cpu-policy §3–§10, §12.4).

* ``facade``: one pure function per kubelet RPC, ``(state, inputs, settings, now) → Decision``;
* ``commands``: the kubelet calls, one type each (shared by the wire, the Allocator and the
  façade), and Allocate's inputs with the pod source's answer (``PodPhase``);
* ``request``, ``prepare``, ``qos``, ``enhancements``: a request validated and its QoS
  resolved (§4);
* ``allocate`` (§7), ``hints``/``hint_masks`` (§8), ``allocation_listing``
  (GetResourcesAllocation with ramp-up completion, §10.1), ``topology_aware`` (§10.2–§10.5),
  ``remove`` (§10.6, §12.4), ``replies``: the domain replies;
* ``pool_sizing``, ``pool_engine``, ``pool_apply``, ``pool_startup``, ``reserve``: the pools
  (§3, §6, §9);
* ``ramp_steps``: the ramp-up machine's steps for a container (§7.3, ``machines.ramp_up``);
* ``errors``: ``UnknownContainerError``, and where each other error of the CPU policy lives;
* ``timestamps`` (§5.7), ``context`` (the decisions' settings, fixed for a run), ``txn`` (a
  decision's working state and events).

Imports ``policy.state`` and ``policy.topology``; nothing imports it but the layers above
``policy``.
"""
