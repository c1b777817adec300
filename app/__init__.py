"""The application: the `fleetscope` command line, the demo, docgen and the profile client.

The composition root. It may import every stage (lazily, inside command handlers); no stage and
not the core may import it.
"""
