"""`cairn`: the command-line client."""
