"""Nova's views, HTTP only, a module per resource: they read a request (bodies.py), check the
caller's role, and answer with queries.py's rows shown by presenters.py or services.py's writes."""
