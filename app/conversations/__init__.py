"""The use cases on an owner's stored conversations that start no run: create, read, change,
delete, cancel (``service``), fork, rewind, import, pages, context (``history``), and the
``Idempotency-Key`` of a request (``idempotency``).

May import the runs layer (the process's ``Services``, ``Delta``, the config rules, recovery,
errors), storage, the domain and settings; the runs layer never imports this package. Each use
case commits once.
"""
