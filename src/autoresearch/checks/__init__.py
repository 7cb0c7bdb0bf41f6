"""What follows the rule's verdict: the review's list of checks (constraints, simplicity,
guard, holdout, approval), guard rework and ablation."""
