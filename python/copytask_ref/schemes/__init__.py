"""One module per positional scheme, each declaring SCHEME (declarations.Scheme). The
registry lists this folder: a new module is a new scheme."""
