"""The AI SDK's UI message stream protocol (the `ai` package's `useChat`, assistant-ui's data
stream runtime): Parley's run events translated to its chunks (``chunks``), stored messages
as its ``UIMessage`` list with stable ids (``messages``), and its chat request body as a
Parley delta and rewind (``request``), and the streamed response (``response``). May import
Starlette, pydantic, the settings, the api's deps and convert modules, the runs
layer and the domain; each module says which it uses.
"""
