"""Agent streams in: the gRPC servicer, its limits and agent identity (transport only)."""
