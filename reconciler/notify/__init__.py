"""Notifications (``[[notify]]``): what happened that a person should hear about (facts found in
the database), recorded once per target, rendered per target kind and sent with a rate limit."""
