"""Quota-aware web search for OpenClaw agents (see README.md)."""

__version__ = "0.1.0"
