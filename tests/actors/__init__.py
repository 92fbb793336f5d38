"""Tests of the actors package."""
