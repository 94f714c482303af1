"""The languages the host speaks to people: which one a person asked for, its message catalogue, and how
dates and numbers are written in it. Agents are never answered through this package: the contract fixes
their text in English."""
