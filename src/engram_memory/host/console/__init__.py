"""The host's console in the browser: review, approvals, records, bindings, audit and health (issue 18).

Host-only like the CLI: bound to loopback, opened with a one-time login link, every form CSRF-checked.
It talks to the engine through the Engine's methods, exactly as the CLI commands do.
"""
