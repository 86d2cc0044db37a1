"""Live pages: the event feed's readers that wait (event streams and long polls).

``event_hub`` is each web process's one listener for new events, which every waiting reader of
the process shares; ``event_scopes`` decides who may see an event without a query per event;
``waits`` is what the live views share (where a reader resumes, a request that waits without a
thread); ``asgi`` answers the re-polls and reconnections the hub can answer alone, before
Django's request handling.
"""
