"""What the next proposal is given: the research memory, the escalation step, the ideas
backlog and hypotheses, the prompt."""
