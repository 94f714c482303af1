"""The host side: CLI, settings, key files, bindings, and the composition root."""
