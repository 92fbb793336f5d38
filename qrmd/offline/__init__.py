"""The tools that read a journal directory, offline (DESIGN.md "Layout", "Who uses it"): the
``qrmd journal`` actions and ``qrmd eviction`` (``commands/``), the re-runs behind
``qrmd journal rerun``, ``qrmd balance plan --from-journal`` and ``qrmd eviction rerun``,
and the Katalyst export. The daemon never imports this package (an import contract says so).

Every one of them rebuilds state on the one journal walk: ``journal.walk`` (a start — the
empty state or a checkpoint — and the records after it, streamed) with the state codec's
per-section registry, ``policy.state.replay`` (the whole state, or one owner's section). The
journal is generic (opaque msgpack records); these modules combine it with the state codec,
one job each:

* ``walk``: the forensic walk — the records with the state before and after each (lock-free,
  from empty or the checkpoint retention left), the topology checked, a progress bar on a
  terminal;
* ``points``: where a question points — ``seq:N``, an absolute time, or a duration back from
  the journal's newest record;
* ``journal_view``: ``show``'s filters and one-line renderings, ``stats``' sums;
* ``state_view``: the state at a point as on-call reads it (containers and cpusets, pools, the
  per-NUMA map, the balancer's rounds, any other section);
* ``changes``: what differs between two states, and which records made each change;
* ``explain`` and ``replies``: every record that touched a pod, directly or through its pool,
  with what kubelet was answered; pod names;
* ``renderers``: one line per cause and per event, by kind — a registry, with a generic line
  for kinds that have no renderer yet;
* ``rerun``: every recorded decision taken again with today's policy, re-runners by cause
  kind; ``decision_rerun``, ``balance_rerun``, ``pressure_rerun``: one Allocator decision,
  one balance round, the CPU pressure decisions;
* ``export`` (pyarrow) and ``report`` (plotly): Parquet rows per event, one HTML page of charts
  (the optional ``forensics`` extra).
"""
