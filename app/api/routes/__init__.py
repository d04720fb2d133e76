"""The routers of the HTTP API and the playground page: thin, each parses, calls one service and
maps the result.

May import app.api (schemas, deps, convert, problems, paths, sse), app.runs and the settings.
"""
