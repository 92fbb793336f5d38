"""The pod source subsystem: kubelet's pod list and the periodic checkers on it."""
