"""Corral: settings, URLs, roles and permissions, and the plumbing every app's API shares."""
