"""The request path: HTTP, framing, memory budgets and tokens, validation, the queue to the writer,
and the server's start-up (both modes)."""
