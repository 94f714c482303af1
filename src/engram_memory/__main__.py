"""`python -m engram_memory` is the `engram-memory` command."""

from engram_memory.host.cli.app import main

if __name__ == "__main__":
    main()
