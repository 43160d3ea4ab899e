"""The agent runtime: training-faithful protocol, parsing, budgets and the episode loop."""
