"""The commands: ``mcp-blackbox`` and its subcommands, ``record`` and ``run`` among them. The top layer:
it uses the recorders (addon) and the analyzer; nothing imports it.
"""
