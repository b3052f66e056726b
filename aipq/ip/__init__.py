"""Information passing: which summaries may prune where (candidates, scan summaries), and Algorithms 1-2 with
the strategies that choose among them (planner)."""
