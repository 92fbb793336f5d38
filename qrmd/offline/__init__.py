"""Forensics on a journal: the questions on-call asks, answered offline (DESIGN.md, "Who uses
it"; the ``qrmd journal`` commands in ``qrmd.commands``).

The journal is generic (``journal/``: opaque msgpack records); these modules combine it with
the state codec, one job each:

* ``points``: where a question points — ``seq:N``, an absolute time, or a duration back from
  the journal's newest record;
* ``replay``: walking the records with the state before and after each (lock-free, from empty
  or the checkpoint retention left), the topology checked, a progress bar on a terminal;
* ``state_view``: the state at a point as on-call reads it (containers and cpusets, pools, the
  per-NUMA map, the balancer's rounds, any other section);
* ``changes``: what differs between two states, and which records made each change;
* ``explain``: every record that touched a pod, directly or through its pool; pod names;
* ``renderers``: one line per cause and per event, by kind — a registry, with a generic line
  for kinds that have no renderer yet;
* ``rerun``: every recorded decision taken again with today's policy, re-runners by cause kind;
* ``export`` (pyarrow) and ``report`` (plotly): Parquet rows per event, one HTML page of charts
  (the optional ``forensics`` extra).
"""
