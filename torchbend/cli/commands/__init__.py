"""The subcommands of ``torchbend``: one module each, holding its options and its action."""
