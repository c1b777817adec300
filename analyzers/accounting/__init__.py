"""GPU-hour accounting, the one definition every rule and report shares (rules.md): the SQL
expressions (sql), the per-window working tables (frames) and the usage report's figures (usage).
"""
