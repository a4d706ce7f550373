"""What each probe kind runs, on which nodes, and how its output becomes a verdict.

plan.py decides the batches (which nodes, which pairs, what runs concurrently);
commands.py builds the exact shell commands; verdicts.py judges parsed results against the
terms in force; runner.py executes a batch over the transports. None of them touch models.
"""
