"""The ports actors reach the world through: small interfaces that ``qrmd/host`` and ``wire``
implement and the composition root injects (DESIGN.md, "Layout").

One module per port family. A port names only domain types (``policy``) and plain Python
values, never a file, a socket or protobuf, so an actor can be driven in tests by a fake that
implements the same interface as the real adapter.

* ``actor_ref``: what a caller needs of an actor it asks (``ActorRef``: a blocking ``ask``
  with a timeout); the gRPC handlers and ``StateStoreCommitter`` take it.
* ``balancer``: what the MemoryBalancer reads each round (per-NUMA metrics, NUMA distances,
  per-container anonymous memory per NUMA).
* ``commit``: how a writer makes its events durable (``Committer``; ``StateStoreCommitter``
  asks the StateStore actor; ``AdoptedSnapshot`` is a writer's copy of the durable state).
* ``migration``: how the MemoryBalancer has its advices carried out (``AdviceExecutor``:
  plan, then start; ``qrmd.host.migrate.CgroupMigrator`` implements it).
* ``pod_source``: which pods the node runs (``PodSource.latest()`` → an immutable
  ``PodListSnapshot`` or ``None``; ``NoPodSource``, the default, lists none).
* ``cgroups``: what the periodic checkers read and write in cgroups (``CpusetReader``: a
  container's real cpuset; ``CpuIdleSetter``: ``cpu.idle`` of the reclaimed pods' cgroup).
* ``clock``: wall and monotonic time (``Clock``; ``SystemClock``); the StateStore and the
  journal it owns read time only through it.
"""
