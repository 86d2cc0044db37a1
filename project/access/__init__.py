"""Who may do what: users and their accounts, roles, grants and the one permission path that
resolves them (``permissions``, with its SQL fast path ``row_permissions`` and the scopes grants
are given on, ``scopes``), and the API tokens people sign in with (``tokens``, their portal page
``token_pages``)."""
