"""The pure domain of qrmd: CPU sets, topology, selection, QoS, state and decisions.

Nothing here touches threads, files, sockets or the clock; time and data come in as
arguments and decisions go out as values.
"""
