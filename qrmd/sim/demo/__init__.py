"""``qrmd demo``: the real daemon driven by the kubelet simulator on a synthetic node.

Modules: ``workload`` (the pods), ``daemon_process`` (the ``qrmd run`` child process),
``view`` (the per-NUMA CPU map and pool table, from the kubelet's answers), ``scenario`` (the
phases).
"""
