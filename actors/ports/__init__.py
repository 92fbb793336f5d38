"""Ports: the small interfaces actors reach the world and each other's mailboxes through.

``wire/`` and ``qrmd/host/`` implement them and the composition root injects them (DESIGN.md,
layout); tests inject fakes with the same interface.
"""
