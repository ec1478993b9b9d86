"""One keyed runtime: events routed to keys (one hash), per-key run state,
decisions, pruning, late records; batch evaluation of a partition; output rows."""
