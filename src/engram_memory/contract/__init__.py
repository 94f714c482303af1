"""What is promised to agents and hosts: codes, states, schemas, canonical JSON, ids. Imports nothing of ours."""
