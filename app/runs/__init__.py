"""Running conversations (DESIGN §4, §4a): the process's ``Services``, a run's start and task,
its event vocabulary and log, resume, cancel, recovery of dead runs.

May import storage, providers, the domain, settings and observability; never app.api nor
app.conversations (the layers above).
"""
