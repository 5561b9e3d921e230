"""The replicated state machine: the data tree, its paths, ACL checks and watches (pure)."""
