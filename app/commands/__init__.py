"""The cards of fleetscope's own commands, one module each, registered in pyproject.toml as
entry points of `fleetscope.commands` exactly as another package registers its commands
(fleetscope.plugins). A card holds the one-line `HELP` that `fleetscope --help` prints and a
`register(subparsers)` that imports the command's module only when the command is built, so the
top-level help imports the cards and no stage. Adding a command: one card here (with the parser
and handler in it, or in the stage's own cli module) and one entry-point line.
"""
