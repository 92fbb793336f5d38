"""Tests of the actors ports."""
