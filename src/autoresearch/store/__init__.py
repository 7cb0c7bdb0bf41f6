"""The records: the ledger and state file, summaries, status, verify and replay."""
