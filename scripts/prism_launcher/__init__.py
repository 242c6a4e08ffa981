"""scripts/prism's modules: common (errors, tools, a run's inputs) <- run (prism run) <- capture
(prism capture); the script itself parses the command line."""
