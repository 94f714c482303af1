"""Who may sign in and what their clients' tokens carry: identity claims mapped to bindings by host rules."""
