"""The adapter: maps elastic requests and resize decisions onto stock Slurm commands.

``commands`` builds argument lists and ``parse`` reads Slurm's output (both pure); ``transport``
runs them; ``slurm_cli`` composes the three; ``resize`` holds the grow and shrink procedures.
"""
