"""One module per option that attaches to a scheme, each declaring OPTION
(declarations.Option). The registry lists this folder: a new module is a new option."""
