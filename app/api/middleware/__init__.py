"""The pure-ASGI middleware: HEAD as GET, strict JSON bodies, the size limit, the allowed hosts,
the Origin check and CORS, request ids and metrics. Streamed responses pay nothing for them.

May import Starlette, app.api.paths and app.api.problems, the settings and observability.
"""
