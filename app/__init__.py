"""Parley: keeps LLM conversations and runs them over HTTP and Server-Sent Events."""
