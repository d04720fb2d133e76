"""Metrics and log context that every layer but the domain may use.

Imports prometheus_client and the standard library only, so storage, providers, runs and the
API can all record into it without importing one another.
"""
