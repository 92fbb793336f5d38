"""The machine: CPU sets, the CPU and NUMA topology, and CPU selection (spec cpu-policy §1–§3).

* ``cpuset``: the immutable ``CPUSet`` and the §1.1 list format;
* ``model``: ``CPUTopology``/``CPUDetails`` and NUMA distances, every §1.2 query;
* ``build``: a topology from the per-CPU facts a reader gathered (sysfs, machine files);
* ``machine_file``: validation of machine files (YAML/JSON documents, already parsed);
* ``synthetic``: the ``synthetic:cpus=…`` generator with the reference's numbering;
* ``selection``: ``take_by_topology`` and the NUMA-balanced takers (§2).

Imports nothing of ``policy`` but ``policy.errors``.
"""
