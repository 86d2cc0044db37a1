"""A minimal Keystone v3 (OpenStack's identity service): password log-in of a Corral user
gives a token (their Corral API token) and a service catalog, so OpenStack clients work."""
