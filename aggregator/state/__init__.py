"""The live snapshot every reader shares: nodes, their facts and connections, in memory."""
