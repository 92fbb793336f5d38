"""Ports: the small interfaces actors reach the world through (DESIGN.md, layout).

``wire/`` and ``qrmd/host/`` implement them and the composition root injects the
implementations; tests inject fakes with the same interface (STYLE.md, Tests).
"""
