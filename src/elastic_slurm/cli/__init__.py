"""The ``elastic-slurm`` command line: argparse plus one library call per subcommand."""
