"""Fast-path evaluators over columns: phrases of a simpler shape evaluated
vectorised over a key's sorted events (the automaton stays the reference)."""
