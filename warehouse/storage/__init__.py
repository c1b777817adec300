"""What makes acknowledged rows durable (the writer and its stores) and keeps the files in shape
(compaction, retention, maintenance)."""
