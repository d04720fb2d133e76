"""The AI SDK's UI message stream protocol (the `ai` package's `useChat`, assistant-ui's data
stream runtime): Parley's run events translated to its chunks (``chunks``), stored messages
as its ``UIMessage`` list with stable ids (``messages``), and its chat request body as a
Parley delta (``request``). May import the runs layer's vocabulary and the domain.
"""
